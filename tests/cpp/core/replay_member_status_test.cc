// Controller::replay_pass with ReplayOptions::member_status: each
// trajectory's own "status" tag takes part in its group's lifecycle. A group
// is terminal when its prompt is and no member is pending or running; failed
// and aborted members are never served nor filtered on and are released
// with their group; a finished prompt whose members all failed or were
// aborted is a failed group.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "controller_test_support.h"
#include "error_matchers.h"
#include "seqflow/controller.h"
#include "seqflow/replay.h"

namespace seqflow {
namespace {

using test::replay_prompt;

using test::throws_invalid;

// Trajectory `index` of the group with its status tag (none when null) and reward.
void trajectory(Controller& controller, const std::string& uid, int index, const char* status, double reward = 1.0) {
  Value tag{{"reward", reward}};
  if (status != nullptr) tag = Value{{"reward", reward}, {"status", status}};
  controller.kv_resolve("train", std::vector<std::string>{uid + "_" + std::to_string(index) + "_0"},
                        std::vector<Value>{tag});
}

ReplayRequest request(int64_t batch_size, bool member_status) {
  ReplayRequest made;
  made.partition_id = "train";
  made.global_steps = 1;
  made.batch_size = batch_size;
  made.options.member_status = member_status;
  return made;
}

// Group "a", finished: members with rewards 1 and 1 (finished) and 0 (`last_status`).
void rewarded_group(Controller& controller, const char* last_status) {
  replay_prompt(controller, "a", "finished", 1);
  trajectory(controller, "a", 0, "finished", 1.0);
  trajectory(controller, "a", 1, "finished", 1.0);
  trajectory(controller, "a", 2, last_status, 0.0);
}

// A pass filtering groups on their trajectories' "reward" tag (DAPO).
ReplayRequest filter_request(bool member_status) {
  ReplayRequest made = request(1, member_status);
  made.options.group_filter_tag = "reward";
  return made;
}

TEST(ReplayMemberStatus, AGroupWithAMemberRunningWaitsForItAsAGroupInFlight) {
  Controller controller;
  replay_prompt(controller, "a", "finished", 1);
  trajectory(controller, "a", 0, "finished");
  trajectory(controller, "a", 1, "running");
  replay_prompt(controller, "b", "finished", 1);
  trajectory(controller, "b", 0, nullptr);  // no status: finished

  // verl's layout: the prompt's status is the group's.
  const auto sampleable = [&](bool member_status) {
    ReplayRequest counted = request(2, member_status);
    counted.step = ReplayStep::kCount;
    return controller.replay_pass(counted).sampleable;
  };
  EXPECT_EQ(sampleable(false), 2);
  EXPECT_EQ(sampleable(true), 1);
  const ReplayPass waiting = controller.replay_pass(request(2, true));
  EXPECT_FALSE(waiting.ready);
  EXPECT_EQ(waiting.sampleable, 1);
  EXPECT_EQ(test::replay_keys(controller).size(), 5u) << "nothing evicted, nothing released";

  trajectory(controller, "a", 1, "finished");
  const ReplayPass served = controller.replay_pass(request(2, true));
  ASSERT_TRUE(served.ready);
  EXPECT_EQ(served.selected_uids, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(served.keys, (std::vector<std::string>{"a_0_0", "a_1_0", "b_0_0"}));
}

TEST(ReplayMemberStatus, FailedAndAbortedMembersAreLeftOutAndReleasedWithTheirGroup) {
  Controller controller;
  replay_prompt(controller, "a", "finished", 1);
  trajectory(controller, "a", 0, "finished");
  trajectory(controller, "a", 1, "aborted");
  trajectory(controller, "a", 2, "failed");
  trajectory(controller, "a", 3, "failure");  // verl's spelling

  const ReplayPass served = controller.replay_pass(request(1, true));
  ASSERT_TRUE(served.ready);
  EXPECT_EQ(served.keys, std::vector<std::string>{"a_0_0"});
  ASSERT_EQ(served.tags.size(), 1u);
  EXPECT_EQ(served.released.size(), 4u) << "the prompt key and the three left-out members";
  EXPECT_EQ(test::replay_keys(controller), std::set<std::string>{"a_0_0"}) << "the served member stays for the trainer";
  EXPECT_EQ(served.cursor.evictions.left_out_members, 3);
  const auto metrics = served.cursor.evictions.metrics("training");
  EXPECT_NE(std::find(metrics.begin(), metrics.end(),
                      std::pair<std::string, double>{"training/rollout_failure/left_out_trajectories", 3.0}),
            metrics.end());
}

TEST(ReplayMemberStatus, AKeptPassReleasesItsLeftOutMembersAndAnswersAgainWithoutThem) {
  Controller controller;
  replay_prompt(controller, "a", "finished", 1);
  trajectory(controller, "a", 0, "finished");
  trajectory(controller, "a", 1, "aborted");
  ReplayRequest kept = request(1, true);
  kept.pass_id = 7;
  kept.lease_ms = 60000;
  const ReplayPass first = controller.replay_pass(kept);
  ASSERT_TRUE(first.kept);
  EXPECT_EQ(first.keys, std::vector<std::string>{"a_0_0"});
  EXPECT_EQ(test::replay_keys(controller), (std::set<std::string>{"a", "a_0_0"})) << "the prompt key is held";
  const ReplayPass again = controller.replay_pass(kept);
  EXPECT_EQ(again.keys, first.keys);
  EXPECT_EQ(again.cursor.evictions.left_out_members, 1) << "counted once, by the pass that released it";
  EXPECT_TRUE(controller.ack_replay_pass("train", 7).acknowledged);
  EXPECT_EQ(test::replay_keys(controller), std::set<std::string>{"a_0_0"});
}

TEST(ReplayMemberStatus, AFinishedPromptWhoseMembersAllFailedIsAFailedGroup) {
  Controller controller;
  replay_prompt(controller, "a", "finished", 1);
  trajectory(controller, "a", 0, "failed");
  trajectory(controller, "a", 1, "aborted");
  replay_prompt(controller, "b", "finished", 1);
  trajectory(controller, "b", 0, "finished");

  const ReplayPass evicted = controller.replay_pass(request(1, true));  // async: failed groups evicted, refilled
  EXPECT_FALSE(evicted.ready);
  EXPECT_EQ(evicted.refill, 1);
  EXPECT_EQ(evicted.cursor.evictions.failed, 1);
  EXPECT_EQ(evicted.cursor.evictions.left_out_members, 2);
  EXPECT_EQ(test::replay_keys(controller), (std::set<std::string>{"b", "b_0_0"}));
  ReplayRequest next = request(1, true);
  next.cursor = evicted.cursor;
  EXPECT_EQ(controller.replay_pass(next).selected_uids, std::vector<std::string>{"b"});
}

TEST(ReplayMemberStatus, WithoutTheOptionNoMemberIsCountedLeftOut) {
  Controller controller;
  replay_prompt(controller, "a", "finished", 1);
  trajectory(controller, "a", 0, "finished");
  trajectory(controller, "a", 1, "failed");
  const ReplayPass served = controller.replay_pass(request(1, false));
  EXPECT_EQ(served.keys, (std::vector<std::string>{"a_0_0", "a_1_0"}));  // verl's layout: every trajectory
  EXPECT_EQ(served.cursor.evictions.left_out_members, 0);
  for (const auto& [name, value] : served.cursor.evictions.metrics("training")) {
    EXPECT_EQ(name.find("left_out"), std::string::npos) << name;
  }
}

TEST(ReplayMemberStatus, AGroupWithAMemberInFlightHoldsTheWaitGate) {
  Controller controller;
  replay_prompt(controller, "old", "finished", 0);
  trajectory(controller, "old", 0, "pending");
  replay_prompt(controller, "new", "finished", 5);
  trajectory(controller, "new", 0, "finished");
  const auto gated = [&](bool member_status) {
    ReplayRequest asked = request(1, member_status);
    asked.global_steps = 5;
    asked.options.max_off_policy_threshold = 2;
    asked.options.strategy = StalenessStrategy::kWait;
    asked.step = ReplayStep::kEvict;
    return !controller.replay_pass(asked).ready;
  };
  EXPECT_FALSE(gated(false)) << "verl's layout: both groups are terminal";
  EXPECT_TRUE(gated(true)) << "the old group is in flight at the threshold";
}

TEST(ReplayMemberStatus, TheGroupFilterReadsOnlyFinishedMembers) {
  const auto filtered = [](bool member_status) {
    Controller controller;
    rewarded_group(controller, "aborted");
    return controller.replay_pass(filter_request(member_status)).cursor.evictions.filtered;
  };
  EXPECT_EQ(filtered(false), 0) << "rewards 1, 1, 0 differ";
  EXPECT_EQ(filtered(true), 1) << "the finished members' rewards are all 1";
}

TEST(ReplayMemberStatus, SyncRefillsAGroupWhoseMembersAllFailedInsteadOfSelectingIt) {
  Controller controller;
  replay_prompt(controller, "a", "finished", 1);
  trajectory(controller, "a", 0, "failed");
  replay_prompt(controller, "b", "finished", 1);
  trajectory(controller, "b", 0, "finished");
  ReplayRequest sync = request(2, true);
  sync.options.mode = ReplayMode::kSync;
  sync.options.refill_failed_groups = true;
  const ReplayPass refilled = controller.replay_pass(sync);
  EXPECT_FALSE(refilled.ready);
  EXPECT_EQ(refilled.refill, 1);
  EXPECT_EQ(refilled.cursor.evictions.failed, 1);
  EXPECT_EQ(test::replay_keys(controller), (std::set<std::string>{"b", "b_0_0"}));
}

// A classification is of the members it read: one left out since (or one
// added) makes the group classified again.
TEST(ReplayMemberStatus, AGroupWhoseMembersChangedAfterItWasClassifiedIsClassifiedAgain) {
  Controller controller;
  rewarded_group(controller, "finished");
  const ReplayRequest asked = filter_request(true);
  ReplayRequest counted = asked;
  counted.step = ReplayStep::kCount;
  EXPECT_EQ(controller.replay_pass(counted).sampleable, 1) << "rewards 1, 1, 0: kept";
  trajectory(controller, "a", 2, "aborted", 0.0);
  const ReplayPass filtered = controller.replay_pass(asked);
  EXPECT_FALSE(filtered.ready);
  EXPECT_EQ(filtered.cursor.evictions.filtered, 1) << "the finished members' rewards are now all 1";
}

TEST(ReplayMemberStatus, ANegativeLeftOutCountInTheCursorIsRefusedByName) {
  Controller controller;
  ReplayRequest asked = request(1, true);
  asked.cursor.evictions.left_out_members = -1;
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(asked); }, {"cursor.evictions.left_out_members = -1"}));
}

TEST(ReplayMemberStatus, AStatusThatIsNoneOfTheFiveIsAnErrorNamingItsKey) {
  Controller controller;
  replay_prompt(controller, "a", "finished", 1);
  trajectory(controller, "a", 0, "done");
  trajectory(controller, "a", 1, "finished");
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(request(1, true)); },
                             {"member_status", "'a_0_0'", "'pending', 'running', 'finished', 'failed'"}));
  EXPECT_TRUE(controller.replay_pass(request(1, false)).ready) << "read only with member_status";
}

}  // namespace
}  // namespace seqflow
