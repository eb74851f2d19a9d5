// Controller::replay_pass: verl 0.9.1's replay-buffer matrix on the
// controller's keys and tags (prompt keys {uid}, trajectories {uid}_s_i).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "controller_test_support.h"
#include "error_matchers.h"
#include "seqflow/controller.h"
#include "seqflow/replay.h"

namespace seqflow {
namespace {

using test::replay_prompt;

using test::throws_code;
using test::throws_invalid;

// A group of trajectories {uid}_s_0 whose tag "reward" takes `rewards`.
void trajectories(Controller& controller, const std::string& uid, const std::vector<double>& rewards) {
  std::vector<std::string> keys;
  std::vector<Value> tags;
  for (size_t s = 0; s < rewards.size(); ++s) {
    keys.push_back(uid + "_" + std::to_string(s) + "_0");
    tags.push_back(Value{{"reward", rewards[s]}});
  }
  controller.kv_resolve("train", keys, tags);
}

void group(Controller& controller, const std::string& uid, const char* status, int64_t step,
           const std::vector<double>& rewards = {0.0, 1.0}) {
  replay_prompt(controller, uid, status, step);
  trajectories(controller, uid, rewards);
}

ReplayRequest request(ReplayMode mode, int64_t global_steps, int64_t batch_size) {
  ReplayRequest made;
  made.partition_id = "train";
  made.global_steps = global_steps;
  made.batch_size = batch_size;
  made.options.mode = mode;
  return made;
}

TEST(ReplaySelection, SelectsTheOldestTerminalGroupsAndClearsOnlyTheirPromptKeys) {
  Controller controller;
  group(controller, "c", "finished", 3);
  group(controller, "a", "finished", 1);
  group(controller, "r", "running", 0);
  group(controller, "b", "failure", 2);
  const ReplayPass pass = controller.replay_pass(request(ReplayMode::kSync, 4, 2));
  ASSERT_TRUE(pass.ready);
  EXPECT_EQ(pass.selected_uids, (std::vector<std::string>{"a", "b"}));
  // Trajectories in arrival order (a's came before b's), with their tags.
  EXPECT_EQ(pass.keys, (std::vector<std::string>{"a_0_0", "a_1_0", "b_0_0", "b_1_0"}));
  EXPECT_EQ(pass.tags[1].at("reward").as_double(), 1.0);
  EXPECT_EQ(pass.released.size(), 2u);
  const std::set<std::string> left = test::replay_keys(controller);
  EXPECT_EQ(left.count("a") + left.count("b"), 0u);
  EXPECT_EQ(left.count("a_0_0") + left.count("c") + left.count("r"), 3u);
  EXPECT_EQ(pass.refill, 0);
}

TEST(ReplaySelection, EqualStepsAreServedInTheirPromptKeysArrivalOrder) {
  Controller controller;
  for (const char* uid : {"z", "m", "a"}) group(controller, uid, "finished", 5);
  EXPECT_EQ(controller.replay_pass(request(ReplayMode::kAsync, 5, 2)).selected_uids,
            (std::vector<std::string>{"z", "m"}));
}

TEST(ReplaySelection, AsyncDropEvictsStaleFinishedGroupsCountsThemAndRefillsThem) {
  Controller controller;
  group(controller, "old", "finished", 1);
  group(controller, "older", "finished", 0);
  group(controller, "fresh", "finished", 9);
  group(controller, "stale_running", "running", 0);
  ReplayRequest asked = request(ReplayMode::kAsync, 10, 1);
  asked.options.max_off_policy_threshold = 3;
  const ReplayPass first = controller.replay_pass(asked);
  EXPECT_FALSE(first.ready);  // verl passes again after a refill
  EXPECT_EQ(first.refill, 2);
  const ReplayEvictions& evicted = first.cursor.evictions;
  EXPECT_EQ(evicted.stale, 2);
  EXPECT_EQ(evicted.stale_span_max, 11);
  EXPECT_EQ(evicted.stale_span_min, 10);
  const auto metrics = evicted.metrics("training");
  ASSERT_EQ(metrics.size(), 4u);
  EXPECT_EQ(metrics[1], (std::pair<std::string, double>{"training/off_policy/evicted_samples_staleness/mean", 10.5}));
  EXPECT_EQ(test::replay_keys(controller).count("old_0_0"), 0u);  // the whole group went
  asked.cursor = first.cursor;
  const ReplayPass second = controller.replay_pass(asked);
  EXPECT_EQ(second.selected_uids, std::vector<std::string>{"fresh"});
  EXPECT_EQ(second.cursor.evictions.stale, 2);  // carried, not counted again
}

TEST(ReplaySelection, SyncKeepsFailedGroupsSampleableByDefault) {
  Controller controller;
  group(controller, "ok", "finished", 1);
  replay_prompt(controller, "failed", "failure", 0);  // no trajectory at all: padded downstream
  const ReplayPass pass = controller.replay_pass(request(ReplayMode::kSync, 2, 2));
  EXPECT_EQ(pass.selected_uids, (std::vector<std::string>{"failed", "ok"}));
  EXPECT_EQ(pass.cursor.evictions.failed, 0);
}

TEST(ReplaySelection, SyncRefillFailedGroupsEvictsThoseWithoutTrajectoriesAndAsksForThem) {
  Controller controller;
  group(controller, "ok", "finished", 1);
  replay_prompt(controller, "failed", "failure", 0);
  ReplayRequest asked = request(ReplayMode::kSync, 2, 2);
  asked.options.refill_failed_groups = true;
  const ReplayPass pass = controller.replay_pass(asked);
  EXPECT_EQ(pass.refill, 1);
  EXPECT_FALSE(pass.ready);
  EXPECT_EQ(pass.cursor.evictions.failed, 1);
  EXPECT_EQ(test::replay_keys(controller).count("failed"), 0u);
}

TEST(ReplaySelection, AsyncFailedGroupsAreEvictedAndRefilled) {
  Controller controller;
  group(controller, "ok", "finished", 1);
  group(controller, "failed", "failure", 1);
  const ReplayPass pass = controller.replay_pass(request(ReplayMode::kAsync, 2, 1));
  EXPECT_EQ(pass.refill, 1);
  EXPECT_EQ(pass.cursor.evictions.metrics("training"),
            (std::vector<std::pair<std::string, double>>{{"training/rollout_failure/evicted_samples", 1.0}}));
  EXPECT_EQ(test::replay_keys(controller).count("failed_0_0"), 0u);
}

TEST(ReplaySelection, SyncSelectionWithoutAnyTrajectoryIsAnErrorAndChangesNothing) {
  Controller controller;
  replay_prompt(controller, "failed", "failure", 0);
  EXPECT_TRUE(throws_code([&] { controller.replay_pass(request(ReplayMode::kSync, 1, 1)); }, ErrorCode::kInternal,
                          {"no materializable trajectories", "refill_failed_groups"}));
  EXPECT_EQ(test::replay_keys(controller).count("failed"), 1u);
}

TEST(ReplaySelection, TheWaitGateHoldsSamplingWhileAnInFlightPromptIsAtTheThreshold) {
  Controller controller;
  group(controller, "done", "finished", 5);
  replay_prompt(controller, "slow", "running", 3);
  ReplayRequest asked = request(ReplayMode::kAsync, 5, 1);
  asked.options.max_off_policy_threshold = 3;
  asked.options.strategy = StalenessStrategy::kWait;
  EXPECT_FALSE(controller.replay_pass(asked).ready);  // span 3 >= 3
  replay_prompt(controller, "slow", "finished", 3);
  trajectories(controller, "slow", {0.0, 1.0});
  const ReplayPass pass = controller.replay_pass(asked);
  EXPECT_EQ(pass.selected_uids, std::vector<std::string>{"slow"});  // oldest first, not dropped
}

TEST(ReplaySelection, AGroupFilterEvictsGroupsWhoseTagHasNumpysStdZeroAsVerlTestsIt) {
  Controller controller;
  group(controller, "same", "finished", 1, {1.0, 1.0});
  group(controller, "zeros", "finished", 1, {0.0, 0.0, 0.0});
  group(controller, "mixed", "finished", 1, {0.0, 1.0});
  group(controller, "single", "finished", 1, {1.0});
  // Equal, but numpy's std of three 0.1s is 1.4e-17 (their mean is not 0.1): verl keeps the group.
  group(controller, "tenths", "finished", 1, {0.1, 0.1, 0.1});
  // Not equal, but their deviations square to 0: numpy's std is 0, verl filters the group.
  group(controller, "tiny", "finished", 1, {1e-200, 2e-200});
  ReplayRequest asked = request(ReplayMode::kAsync, 1, 1);
  asked.options.group_filter_tag = "reward";
  const ReplayPass pass = controller.replay_pass(asked);
  EXPECT_EQ(pass.refill, 3);
  EXPECT_EQ(pass.cursor.evictions.filtered, 3);
  EXPECT_EQ(pass.cursor.evictions.filtered_values,
            (std::vector<std::pair<double, int64_t>>{{1.0, 1}, {0.0, 1}, {1e-200, 1}}));
  const std::set<std::string> left = test::replay_keys(controller);
  EXPECT_EQ(left.count("same") + left.count("zeros_2_0") + left.count("tiny"), 0u);
  EXPECT_EQ(left.count("mixed") + left.count("single") + left.count("tenths"), 3u);
}

TEST(ReplaySelection, AFinishedGroupIsClassifiedOnceAndTheCountStepEvictsNothing) {
  Controller controller;
  group(controller, "g", "finished", 1, {0.0, 1.0});
  ReplayRequest counted = request(ReplayMode::kAsync, 1, 0);
  counted.step = ReplayStep::kCount;
  counted.options.group_filter_tag = "reward";
  EXPECT_EQ(controller.replay_pass(counted).sampleable, 1);
  trajectories(controller, "g", {1.0, 1.0});  // a finished group does not change; if it did, its class stays
  EXPECT_EQ(controller.replay_pass(counted).sampleable, 1);
  replay_prompt(controller, "g", "running", 1);  // no longer finished: forgotten, classified again when it finishes
  EXPECT_EQ(controller.replay_pass(counted).sampleable, 0);
  replay_prompt(controller, "g", "finished", 1);
  EXPECT_EQ(controller.replay_pass(counted).sampleable, 0);
  EXPECT_EQ(test::replay_keys(controller).count("g"), 1u);  // counting evicted nothing
}

TEST(ReplaySelection, AFinishedGroupWithoutTheFilterTagIsAnErrorNamingIt) {
  Controller controller;
  replay_prompt(controller, "g", "finished", 1);
  controller.kv_resolve("train", std::vector<std::string>{"g_0_0"}, std::vector<Value>{Value{{"score", 1}}});
  ReplayRequest asked = request(ReplayMode::kAsync, 1, 1);
  asked.options.group_filter_tag = "reward";
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(asked); }, {"group filter tag 'reward'", "'g'"}));
}

TEST(ReplaySelection, SyncFilteringRefillsTwiceTheEvictionsWithinTheInFlightBoundThenDrainsAndDiscardsTheSurplus) {
  Controller controller;
  group(controller, "same", "finished", 1, {1.0, 1.0});
  group(controller, "ok", "finished", 1);
  replay_prompt(controller, "busy", "running", 1);
  ReplayRequest asked = request(ReplayMode::kSync, 1, 2);
  asked.options.group_filter_tag = "reward";
  asked.options.max_inflight_prompts = 2;
  const ReplayPass first = controller.replay_pass(asked);
  EXPECT_EQ(first.refill, 1);  // credit 2, one slot free
  EXPECT_EQ(first.cursor.refill_credit, 1);
  asked.cursor = first.cursor;
  group(controller, "new", "running", 1);  // the refill, in flight: no slot left
  const ReplayPass second = controller.replay_pass(asked);
  EXPECT_EQ(second.refill, 0);
  EXPECT_FALSE(second.ready);
  asked.cursor = second.cursor;
  group(controller, "busy", "finished", 1);
  group(controller, "new", "finished", 1);
  const ReplayPass third = controller.replay_pass(asked);
  ASSERT_TRUE(third.ready);
  EXPECT_EQ(third.selected_uids, (std::vector<std::string>{"ok", "busy"}));
  EXPECT_EQ(third.cursor.evictions.surplus, 1);  // "new" discarded, with its trajectories
  EXPECT_EQ(test::replay_keys(controller).count("new_0_0"), 0u);
}

TEST(ReplaySelection, WithEvictionOffEveryTerminalGroupIsSampleable) {
  Controller controller;
  group(controller, "failed", "failure", 0);
  ReplayRequest asked = request(ReplayMode::kAsync, 9, 1);
  asked.options.evict = false;
  asked.options.max_off_policy_threshold = 1;
  EXPECT_EQ(controller.replay_pass(asked).selected_uids, std::vector<std::string>{"failed"});
}

TEST(ReplaySelection, BadOptionsAndBadPromptTagsAreRefusedByName) {
  Controller controller;
  ReplayRequest asked = request(ReplayMode::kAsync, 1, 0);
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(asked); }, {"batch_size = 0"}));
  asked.batch_size = 1;
  asked.options.max_off_policy_threshold = 0;
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(asked); }, {"max_off_policy_threshold = 0"}));
  asked.options.max_off_policy_threshold.reset();
  asked.options.gen_batch_size = 0;
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(asked); }, {"gen_batch_size = 0"}));
  asked.options.gen_batch_size = 1;
  asked.wait_ms = -1;
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(asked); }, {"wait_ms = -1"}));
  asked.wait_ms = 0;
  asked.options.mode = ReplayMode::kSync;
  asked.options.group_filter_tag = "reward";
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(asked); }, {"max_inflight_prompts = 0"}));
  asked.options.group_filter_tag.reset();
  asked.step = ReplayStep::kEvict;
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(asked); }, {"step 'evict'", "'async'"}));
  EXPECT_TRUE(throws_invalid([] { parse_replay_mode("fast"); }, {"mode", "'fast'"}));
  EXPECT_TRUE(throws_invalid([] { parse_staleness_strategy("keep"); }, {"max_off_policy_strategy", "'keep'"}));
  controller.kv_resolve("train", std::vector<std::string>{"p"},
                        std::vector<Value>{Value{{"is_prompt", true}, {"status", "done"}, {"global_steps", 1}}});
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(request(ReplayMode::kAsync, 1, 1)); },
                             {"prompt key 'p'", "\"done\""}));
}

// A peer sends the steps and the cursor: values whose spans or sums could
// overflow are refused, naming them, before anything changes; so is a
// prompt tag out of range.
TEST(ReplaySelection, StepsAndCountsOutOfRangeAreRefused) {
  Controller controller;
  group(controller, "u1", "finished", 1, {0.0, 1.0});
  const std::set<std::string> before = test::replay_keys(controller);
  ReplayRequest huge_steps = request(ReplayMode::kAsync, kMaxReplayCount + 1, 1);
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(huge_steps); }, {"global_steps", "2^53"}));
  ReplayRequest low_steps = request(ReplayMode::kAsync, -kMaxReplayCount - 1, 1);
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(low_steps); }, {"global_steps", ">="}));
  ReplayRequest hostile_cursor = request(ReplayMode::kAsync, 1, 1);
  hostile_cursor.cursor.evictions.stale_span_sum = INT64_MAX;
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(hostile_cursor); }, {"cursor.evictions.stale_span_sum"}));
  hostile_cursor.cursor.evictions.stale_span_sum = 0;
  hostile_cursor.cursor.evictions.failed = -1;
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(hostile_cursor); }, {"cursor.evictions.failed"}));
  replay_prompt(controller, "u2", "finished", kMaxReplayCount + 1);
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(request(ReplayMode::kAsync, 1, 1)); },
                             {"prompt key 'u2'", "global_steps", "2^53"}));
  EXPECT_EQ(test::replay_keys(controller).count("u1"), 1u) << "a refused pass changed nothing";
  EXPECT_TRUE(before.count("u1"));
}

}  // namespace
}  // namespace seqflow
