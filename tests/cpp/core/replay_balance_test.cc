// Controller::replay_pass with balance_ranks: the selected trajectories
// placed rank by rank as verl's trainer places a sampled batch
// (_balance_batch), or an error that changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "controller_test_support.h"
#include "error_matchers.h"
#include "seqflow/controller.h"
#include "seqflow/replay.h"

namespace seqflow {
namespace {

using test::throws_invalid;

// A finished group: prompt {uid} and trajectories {uid}_s_0 tagged seq_len.
void group(Controller& controller, const std::string& uid, int64_t step, const std::vector<int64_t>& lengths) {
  controller.kv_resolve("train", std::vector<std::string>{uid},
                        std::vector<Value>{Value{{"is_prompt", true}, {"status", "finished"}, {"global_steps", step}}});
  std::vector<std::string> keys;
  std::vector<Value> tags;
  for (size_t s = 0; s < lengths.size(); ++s) {
    keys.push_back(uid + "_" + std::to_string(s) + "_0");
    tags.push_back(Value{{"seq_len", lengths[s]}});
  }
  controller.kv_resolve("train", keys, tags);
}

ReplayRequest balanced(int64_t batch_size, int64_t ranks) {
  ReplayRequest made;
  made.partition_id = "train";
  made.global_steps = 10;
  made.batch_size = batch_size;
  made.options.balance_ranks = ranks;
  return made;
}

std::vector<int64_t> lengths_in(const ReplayPass& pass) {
  std::vector<int64_t> out;
  for (const Value& tag : pass.tags) out.push_back(tag.at("seq_len").as_int());
  return out;
}

// Four groups of four trajectories, long ones first in arrival order: the
// arrival order's first rank would get every long trajectory.
void skewed(Controller& controller) {
  group(controller, "a", 1, {4000, 3900, 3800, 3700});
  group(controller, "b", 2, {3600, 3500, 100, 90});
  group(controller, "c", 3, {80, 70, 60, 50});
  group(controller, "d", 4, {40, 30, 20, 10});
}

TEST(ReplayBalance, TrajectoriesComeRankByRankWithEqualCountsAndTheirSums) {
  Controller controller;
  skewed(controller);
  const ReplayPass pass = controller.replay_pass(balanced(4, 4));
  ASSERT_TRUE(pass.ready);
  EXPECT_EQ(pass.rank_sizes, (std::vector<int64_t>{4, 4, 4, 4}));
  const std::vector<int64_t> lengths = lengths_in(pass);
  ASSERT_EQ(lengths.size(), 16u);
  for (size_t rank = 0; rank < 4; ++rank) {
    const int64_t sum = std::accumulate(lengths.begin() + 4 * rank, lengths.begin() + 4 * rank + 4, int64_t{0});
    EXPECT_EQ(pass.rank_lengths.at(rank), sum) << rank;
  }
  // Before balancing: the arrival order's chunks (a's four, b's four, ...).
  EXPECT_EQ(pass.arrival_rank_lengths, (std::vector<int64_t>{15400, 7290, 260, 100}));
  const auto [lightest, heaviest] = std::minmax_element(pass.rank_lengths.begin(), pass.rank_lengths.end());
  EXPECT_LT(*heaviest - *lightest, 15400 - 100);
  EXPECT_LT(*heaviest, 15400 / 2) << "a rank still holds most of the long trajectories";
  // The same trajectories, each once, with their own tags.
  std::set<std::string> keys(pass.keys.begin(), pass.keys.end());
  EXPECT_EQ(keys.size(), 16u);
  for (size_t i = 0; i < pass.keys.size(); ++i) {
    const std::string uid = pass.keys[i].substr(0, 1);
    EXPECT_TRUE(uid == "a" || uid == "b" || uid == "c" || uid == "d") << pass.keys[i];
  }
}

TEST(ReplayBalance, OffKeepsTheArrivalOrderAndSaysNothingOfRanks) {
  Controller controller;
  skewed(controller);
  const ReplayPass pass = controller.replay_pass(balanced(4, 0));
  EXPECT_EQ(lengths_in(pass),
            (std::vector<int64_t>{4000, 3900, 3800, 3700, 3600, 3500, 100, 90, 80, 70, 60, 50, 40, 30, 20, 10}));
  EXPECT_TRUE(pass.rank_sizes.empty() && pass.rank_lengths.empty() && pass.arrival_rank_lengths.empty());
}

TEST(ReplayBalance, ACountOffTheRanksIsServedInArrivalOrder) {
  Controller controller;
  skewed(controller);
  const ReplayPass pass = controller.replay_pass(balanced(4, 3));  // 16 trajectories, 3 ranks
  ASSERT_TRUE(pass.ready);
  EXPECT_EQ(lengths_in(pass),
            (std::vector<int64_t>{4000, 3900, 3800, 3700, 3600, 3500, 100, 90, 80, 70, 60, 50, 40, 30, 20, 10}));
  EXPECT_TRUE(pass.rank_sizes.empty());
}

TEST(ReplayBalance, AMissingBadOrOverflowingLengthIsRefusedChangingNothing) {
  Controller controller;
  skewed(controller);
  const std::set<std::string> before = test::listed_keys(controller, "train");
  ReplayRequest other_tag = balanced(4, 4);
  other_tag.options.balance_length_tag = "response_len";
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(other_tag); }, {"response_len", "a_0_0", "no such tag"}));
  controller.kv_resolve("train", std::vector<std::string>{"d_3_0"}, std::vector<Value>{Value{{"seq_len", -1}}});
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(balanced(4, 4)); }, {"seq_len", "d_3_0", "-1"}));
  // verl's workload of 2^40 tokens overflows int64.
  controller.kv_resolve("train", std::vector<std::string>{"d_3_0"},
                        std::vector<Value>{Value{{"seq_len", int64_t{1} << 40}}});
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(balanced(4, 4)); }, {"seq_len", "d_3_0", "1099511627776"}));
  EXPECT_EQ(test::listed_keys(controller, "train"), before) << "a refused pass released keys";
}

TEST(ReplayBalance, BadBalanceOptionsAreRefusedByName) {
  Controller controller;
  ReplayRequest bad = balanced(1, -1);
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(bad); }, {"balance_ranks = -1"}));
  bad = balanced(1, int64_t{1} << 21);
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(bad); }, {"balance_ranks"}));
  bad = balanced(1, 2);
  bad.options.balance_workload = "online";
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(bad); }, {"balance_workload 'online'"}));
  bad.options.balance_workload = "cubic";
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(bad); }, {"balance_workload 'cubic'"}));
  bad = balanced(1, 2);
  bad.options.balance_length_tag = "";
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(bad); }, {"balance_length_tag"}));
}

TEST(ReplayBalance, AKeptPassAnsweredAgainKeepsItsRanks) {
  Controller controller;
  skewed(controller);
  ReplayRequest kept = balanced(4, 2);
  kept.pass_id = 7;
  kept.lease_ms = 60000;
  const ReplayPass first = controller.replay_pass(kept);
  const ReplayPass again = controller.replay_pass(kept);
  EXPECT_EQ(again.keys, first.keys);
  EXPECT_EQ(again.rank_sizes, first.rank_sizes);
  EXPECT_EQ(again.rank_lengths, first.rank_lengths);
}

}  // namespace
}  // namespace seqflow
