// Controller::replay_pass with a pass_id, exactly once: a pass whose answer
// was lost is answered again as it was (the same groups, refill and cursor),
// its selected prompts are held, not cleared, until ack_replay_pass, and an
// unacknowledged selection is sampleable again when its lease ends, which
// watchers are told. Nothing is served twice to callers that acknowledge.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "core/replay_leases.h"
#include "core/replay_selection.h"
#include "controller_test_support.h"
#include "error_matchers.h"
#include "seqflow/controller.h"
#include "seqflow/replay.h"

namespace seqflow {
namespace {

using test::throws_invalid;

void group(Controller& controller, const std::string& uid, const char* status, int64_t step) {
  controller.kv_resolve("train", std::vector<std::string>{uid, uid + "_0_0", uid + "_1_0"},
                        std::vector<Value>{Value{{"is_prompt", true}, {"status", status}, {"global_steps", step}},
                                           Value{{"reward", 0.0}}, Value{{"reward", 1.0}}});
}

ReplayRequest kept_request(uint64_t pass_id, int64_t batch_size, int64_t lease_ms = test::kMinuteMs) {
  ReplayRequest request;
  request.partition_id = "train";
  request.global_steps = 3;
  request.batch_size = batch_size;
  request.pass_id = pass_id;
  request.lease_ms = lease_ms;
  return request;
}

TEST(ReplayLeases, ALostAnswerIsAnsweredAgainAndTheSelectionIsHeldUntilAcknowledged) {
  Controller controller;
  group(controller, "a", "finished", 1);
  group(controller, "b", "finished", 2);
  const ReplayPass first = controller.replay_pass(kept_request(7, 1));
  ASSERT_TRUE(first.ready && first.kept);
  EXPECT_EQ(first.selected_uids, std::vector<std::string>{"a"});
  EXPECT_TRUE(first.released.empty());  // the prompt key is held, not cleared
  EXPECT_TRUE(test::replay_keys(controller).count("a"));

  // The answer was lost: the same pass again gets the same answer, not b.
  const ReplayPass again = controller.replay_pass(kept_request(7, 1));
  EXPECT_EQ(again.selected_uids, first.selected_uids);
  EXPECT_EQ(again.keys, first.keys);
  EXPECT_EQ(again.tags, first.tags);
  EXPECT_TRUE(again.kept);

  // Another pass does not select the held group.
  const ReplayPass next = controller.replay_pass(kept_request(8, 2));
  EXPECT_FALSE(next.ready);
  EXPECT_EQ(next.sampleable, 1);
  ReplayRequest count = kept_request(0, 0, 0);
  count.step = ReplayStep::kCount;
  EXPECT_EQ(controller.replay_pass(count).sampleable, 1);

  const ReplayAck ack = controller.ack_replay_pass("train", 7);
  EXPECT_TRUE(ack.acknowledged);
  EXPECT_EQ(ack.released.size(), 1u);  // the prompt key
  EXPECT_EQ(test::replay_keys(controller), (std::set<std::string>{"a_0_0", "a_1_0", "b", "b_0_0", "b_1_0"}));
  const ReplayAck repeated = controller.ack_replay_pass("train", 7);  // its reply lost, sent again
  EXPECT_TRUE(repeated.acknowledged);
  EXPECT_TRUE(repeated.released.empty());
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(kept_request(7, 1)); }, {"pass_id = 7", "acknowledged"}));
  EXPECT_EQ(controller.replay_pass(kept_request(9, 1)).selected_uids, std::vector<std::string>{"b"});
}

TEST(ReplayLeases, AnUnacknowledgedSelectionIsSampleableAgainWhenItsLeaseEnds) {
  Controller controller;
  group(controller, "a", "finished", 1);
  ASSERT_EQ(controller.replay_pass(kept_request(7, 1, 1)).selected_uids, std::vector<std::string>{"a"});
  ReplayRequest count = kept_request(0, 0, 0);
  count.step = ReplayStep::kCount;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (controller.replay_pass(count).sampleable == 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the held group never came back";
  }
  EXPECT_FALSE(controller.ack_replay_pass("train", 7).acknowledged);  // too late: the group went back
  const ReplayPass taken = controller.replay_pass(kept_request(8, 1));
  EXPECT_EQ(taken.selected_uids, std::vector<std::string>{"a"});
  EXPECT_TRUE(controller.ack_replay_pass("train", 8).acknowledged);
  EXPECT_EQ(test::replay_keys(controller), (std::set<std::string>{"a_0_0", "a_1_0"}));
}

// No call comes in: the watch itself notices the lease's end and tells it.
TEST(ReplayLeases, AWatcherIsToldWhenAnUnacknowledgedSelectionComesBack) {
  Controller controller;
  group(controller, "a", "finished", 1);
  const WatchBatch start = controller.watch(test::watch_request("train", 0));
  ASSERT_EQ(controller.replay_pass(kept_request(7, 1, 200)).selected_uids, std::vector<std::string>{"a"});
  uint64_t cursor = start.cursor;
  std::vector<Change> changes;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (changes.empty() && std::chrono::steady_clock::now() < deadline) {
    const WatchBatch batch = controller.watch(test::watch_request("train", cursor, std::chrono::seconds(10)));
    changes = batch.changes;
    cursor = batch.cursor;
  }
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, ChangeKind::kTagged);
  EXPECT_EQ(changes[0].key, "a");
  EXPECT_EQ(changes[0].tag, (Value{{"is_prompt", true}, {"status", "finished"}, {"global_steps", 1}}));
  EXPECT_FALSE(controller.ack_replay_pass("train", 7).acknowledged);  // it went back
}

TEST(ReplayLeases, ARefillIsAnsweredOnceAndAPassThatChangesNothingIsNotKept) {
  Controller controller;
  group(controller, "failed", "failure", 1);
  group(controller, "busy", "running", 2);
  ReplayRequest evict = kept_request(7, 2);
  evict.step = ReplayStep::kEvict;
  const ReplayPass first = controller.replay_pass(evict);
  ASSERT_TRUE(first.kept);
  EXPECT_EQ(first.refill, 1);
  EXPECT_EQ(first.released.size(), 3u);
  const ReplayPass again = controller.replay_pass(evict);
  EXPECT_EQ(again.refill, 1);
  EXPECT_TRUE(again.released.empty());  // dropped once, by the first answer's caller
  EXPECT_EQ(again.cursor.evictions.failed, 1);
  EXPECT_TRUE(controller.ack_replay_pass("train", 7).acknowledged);

  evict.pass_id = 8;
  const ReplayPass idle = controller.replay_pass(evict);
  EXPECT_EQ(idle.refill, 0);
  EXPECT_FALSE(idle.kept);
  EXPECT_FALSE(controller.ack_replay_pass("train", 8).acknowledged);
}

TEST(ReplayLeases, BadPassIdsAndLeasesAreRefusedByName) {
  Controller controller;
  group(controller, "a", "finished", 1);
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(kept_request(7, 1, 0)); }, {"lease_ms = 0"}));
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(kept_request(0, 1, 5)); }, {"lease_ms = 5", "pass_id"}));
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(kept_request(7, 1, core::kMaxReplayLeaseMs + 1)); },
                             {"lease_ms", "an hour"}));
  ASSERT_TRUE(controller.replay_pass(kept_request(7, 1)).kept);
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(kept_request(7, 2)); },
                             {"pass_id = 7", "another step, global_steps or batch_size"}));
  EXPECT_TRUE(throws_invalid([&] { controller.ack_replay_pass("train", 0); }, {"pass_id = 0"}));
  EXPECT_TRUE(throws_invalid([&] { controller.ack_replay_pass("", 7); }, {"partition_id"}));
}

// Passes end in the order of their leases, an acknowledged one at the
// earlier of its lease and kAcknowledgedReplayPassKept, and only those that
// ended: what an unacknowledged one held is sampleable again.
TEST(ReplayLeases, PassesEndByTheirLeasesAcknowledgedOrNot) {
  using Clock = core::ReplayLeases::Clock;
  const Clock::time_point now = Clock::now();
  core::ReplayLeases leases;
  auto kept = [&](std::chrono::minutes lease, int64_t held_index) {
    core::ReplayLeases::Kept made;
    made.expiry = now + lease;
    made.held = {{held_index, 1}};
    return made;
  };
  leases.keep(leases.stage("p", 1, kept(std::chrono::minutes(30), 10)));  // acknowledged below: ends at 10 min
  leases.keep(leases.stage("p", 2, kept(std::chrono::minutes(5), 20)));
  leases.keep(leases.stage("p", 3, kept(std::chrono::minutes(20), 30)));
  core::ReplayLeases::Kept* first = leases.find("p", 1);
  ASSERT_NE(first, nullptr);
  leases.acknowledge(*first);
  leases.expire(now + std::chrono::minutes(6));
  EXPECT_EQ(leases.find("p", 2), nullptr);
  ASSERT_NE(leases.held("p"), nullptr);
  EXPECT_EQ(leases.held("p")->count(20), 0u);
  EXPECT_EQ(leases.held("p")->count(30), 1u);
  leases.expire(now + core::kAcknowledgedReplayPassKept + std::chrono::seconds(1));
  EXPECT_EQ(leases.find("p", 1), nullptr);
  EXPECT_NE(leases.find("p", 3), nullptr);
  leases.expire(now + std::chrono::minutes(21));
  EXPECT_EQ(leases.find("p", 3), nullptr);
}

// A staged pass is nothing until kept: dropped, it leaves no pass and no held
// prompt; kept, it holds its prompts beside those held before (a prompt held
// again takes the newer generation); an id kept already is not staged again.
TEST(ReplayLeases, AStagedPassIsKeptWholeOrNotAtAll) {
  using Clock = core::ReplayLeases::Clock;
  core::ReplayLeases leases;
  auto kept = [](std::vector<core::ReplayLeases::Prompt> held) {
    core::ReplayLeases::Kept made;
    made.expiry = Clock::now() + std::chrono::minutes(1);
    made.held = std::move(held);
    return made;
  };
  { const core::ReplayLeases::Staged dropped = leases.stage("p", 1, kept({{10, 1}})); }
  EXPECT_EQ(leases.find("p", 1), nullptr);
  EXPECT_EQ(leases.held("p"), nullptr);
  EXPECT_FALSE(leases.next_expiry().has_value());

  leases.keep(leases.stage("p", 1, kept({{10, 1}, {11, 1}})));
  core::ReplayLeases::Staged second = leases.stage("p", 2, kept({{11, 2}, {12, 1}}));
  EXPECT_EQ(leases.find("p", 2), nullptr);
  EXPECT_EQ(leases.held("p")->size(), 2u);
  leases.keep(std::move(second));
  ASSERT_NE(leases.find("p", 2), nullptr);
  EXPECT_EQ(*leases.held("p"), (core::ReplayLeases::Held{{10, 1}, {11, 2}, {12, 1}}));
  EXPECT_TRUE(test::throws_code([&] { leases.stage("p", 2, kept({})); }, ErrorCode::kInternal,
                                {"replay pass 2", "kept already"}));
  leases.expire(Clock::now() + std::chrono::minutes(2));
  EXPECT_EQ(leases.held("p"), nullptr);
}

TEST(ReplayLeases, KeptPassesAreBoundedAndAHeldPromptClearedMeanwhileIsSkipped) {
  Controller controller;
  for (size_t i = 0; i <= core::kMaxKeptReplayPasses; ++i) {
    controller.kv_resolve("train", std::vector<std::string>{"p" + std::to_string(i)},
                          std::vector<Value>{Value{{"is_prompt", true}, {"status", "finished"}, {"global_steps", 1}}});
  }
  for (uint64_t id = 1; id <= core::kMaxKeptReplayPasses; ++id)
    ASSERT_TRUE(controller.replay_pass(kept_request(id, 1)).kept);
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(kept_request(5000, 1)); },
                             {"1024 replay passes are kept unacknowledged"}));
  ReplayRequest count = kept_request(0, 0, 0);
  count.step = ReplayStep::kCount;
  EXPECT_EQ(controller.replay_pass(count).sampleable, 1);  // the refused pass changed nothing

  controller.kv_clear("train", std::vector<std::string>{"p0"});  // held by pass 1
  const ReplayAck ack = controller.ack_replay_pass("train", 1);
  EXPECT_TRUE(ack.acknowledged);
  EXPECT_TRUE(ack.released.empty());
  EXPECT_TRUE(controller.replay_pass(kept_request(5000, 1)).kept);  // room again: acknowledged ones keep no answer
}

}  // namespace
}  // namespace seqflow
