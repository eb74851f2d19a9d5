// Controller::reissue_inflight_prompts, verl's trainer resuming: the prompts
// whose status is pending or running are tagged pending at the resumed step
// (merged into their tags), and only their trajectories are released; keys
// outside verl's layout, finished and failed groups stay as they were (with
// member_status, but for those whose members were still generating).
#include <gtest/gtest.h>

#include <map>
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

Value prompt_tag(const char* status, int64_t step) {
  return Value{{"is_prompt", true}, {"status", status}, {"global_steps", step}};
}

void put(Controller& controller, const std::string& key, Value tag) {
  controller.kv_resolve("train", std::vector<std::string>{key}, std::vector<Value>{std::move(tag)});
}

std::map<std::string, Value> listed_tags(const Controller& controller) {
  std::map<std::string, Value> tags;
  const std::string partition = "train";
  for (const PartitionKeys& listed : controller.kv_list(&partition)) {
    for (size_t i = 0; i < listed.size(); ++i) tags.emplace(listed.key(i), listed.tag(i));
  }
  return tags;
}

TEST(ReplayReissue, InFlightPromptsArePendingAtTheStepAndOnlyTheirTrajectoriesGo) {
  Controller controller;
  put(controller, "running", prompt_tag("running", 3));
  put(controller, "done", prompt_tag("finished", 2));
  put(controller, "running_0_0", Value{{"session", 0}});
  put(controller, "pending", Value{{"is_prompt", 1}, {"status", "pending"}, {"global_steps", 4}, {"source", "gsm8k"}});
  put(controller, "pending_0_0", Value::object());
  put(controller, "done_0_0", Value{{"session", 0}});
  put(controller, "failed", prompt_tag("failure", 1));
  put(controller, "failed_0_0", Value::object());
  put(controller, "running_1_0", Value{{"session", 1}});
  // Outside verl's layout: no prompt holds uid "orphan"; "odd" is a prompt of no known status; "loose" is no prompt.
  put(controller, "orphan_0_0", Value::object());
  put(controller, "odd", prompt_tag("paused", 1));
  put(controller, "loose", Value{{"status", "running"}});
  std::map<std::string, Value> before = listed_tags(controller);

  const ReissuedPrompts reissued = controller.reissue_inflight_prompts("train", 9, false);
  EXPECT_EQ(reissued.keys, (std::vector<std::string>{"running", "pending"}));  // arrival order
  EXPECT_EQ(reissued.cleared_trajectories, 3);
  EXPECT_EQ(reissued.released.size(), 3u);

  std::map<std::string, Value> want = before;
  for (const char* gone : {"running_0_0", "running_1_0", "pending_0_0"}) want.erase(gone);
  want["running"] = prompt_tag("pending", 9);
  want["pending"] = Value{{"is_prompt", true}, {"status", "pending"}, {"global_steps", 9}, {"source", "gsm8k"}};
  EXPECT_EQ(listed_tags(controller), want);
}

TEST(ReplayReissue, APartitionWithNothingInFlightOrNoneAtAllIsLeftAlone) {
  Controller controller;
  EXPECT_TRUE(controller.reissue_inflight_prompts("train", 1, false).keys.empty());  // no partition
  controller.kv_resolve("train", {}, {});
  EXPECT_TRUE(controller.reissue_inflight_prompts("train", 1, false).keys.empty());  // no keys
  put(controller, "done", prompt_tag("finished", 2));
  put(controller, "done_0_0", Value::object());
  const std::map<std::string, Value> before = listed_tags(controller);
  const ReissuedPrompts reissued = controller.reissue_inflight_prompts("train", 1, false);
  EXPECT_TRUE(reissued.keys.empty());
  EXPECT_EQ(reissued.cleared_trajectories, 0);
  EXPECT_EQ(listed_tags(controller), before);
}

TEST(ReplayReissue, TheReissuedGroupsAreInFlightForTheNextPass) {
  Controller controller;
  put(controller, "late", prompt_tag("running", 1));
  put(controller, "late_0_0", Value::object());
  put(controller, "ready", prompt_tag("finished", 1));
  put(controller, "ready_0_0", Value::object());
  ASSERT_EQ(controller.reissue_inflight_prompts("train", 5, false).keys, std::vector<std::string>{"late"});
  ReplayRequest request;
  request.partition_id = "train";
  request.global_steps = 5;
  request.batch_size = 2;
  request.step = ReplayStep::kCount;
  EXPECT_EQ(controller.replay_pass(request).sampleable, 1);  // "ready" only: "late" is pending again
}

TEST(ReplayReissue, WatchersSeeTheTrajectoriesClearedAndThePromptsTagged) {
  Controller controller;
  put(controller, "late", prompt_tag("running", 1));
  put(controller, "late_0_0", Value::object());
  const WatchBatch start = controller.watch(test::watch_request("train", 0));
  controller.reissue_inflight_prompts("train", 5, false);
  const WatchBatch changes = controller.watch(test::watch_request("train", start.cursor));
  ASSERT_EQ(changes.changes.size(), 2u);
  EXPECT_EQ(changes.changes[0].kind, ChangeKind::kCleared);
  EXPECT_EQ(changes.changes[0].key, "late_0_0");
  EXPECT_EQ(changes.changes[1].kind, ChangeKind::kTagged);
  EXPECT_EQ(changes.changes[1].key, "late");
  EXPECT_EQ(changes.changes[1].tag, prompt_tag("pending", 5));
}

// A run that died while some members were still generating: their prompts
// were already tagged finished (or failure), so verl's layout leaves them.
void put_groups_with_members_in_flight(Controller& controller) {
  put(controller, "partial", prompt_tag("finished", 2));
  put(controller, "partial_0_0", Value{{"status", "finished"}});
  put(controller, "partial_1_0", Value{{"status", "running"}});
  put(controller, "done", prompt_tag("finished", 2));
  put(controller, "done_0_0", Value{{"status", "finished"}});
  put(controller, "done_1_0", Value{{"status", "failed"}});
  put(controller, "abandoned", prompt_tag("failure", 1));
  put(controller, "abandoned_0_0", Value{{"status", "pending"}});
  put(controller, "running", prompt_tag("running", 3));
  put(controller, "running_0_0", Value{{"status", "finished"}});
  put(controller, "plain", prompt_tag("finished", 1));
  put(controller, "plain_0_0", Value::object());  // no status: finished
}

TEST(ReplayReissue, WithMemberStatusATerminalPromptWhoseMembersStillRunIsReissuedWhole) {
  Controller controller;
  put_groups_with_members_in_flight(controller);
  const std::map<std::string, Value> before = listed_tags(controller);

  const ReissuedPrompts reissued = controller.reissue_inflight_prompts("train", 9, true);
  EXPECT_EQ(reissued.keys, (std::vector<std::string>{"partial", "abandoned", "running"}));  // arrival order
  EXPECT_EQ(reissued.cleared_trajectories, 4);
  EXPECT_EQ(reissued.released.size(), 4u);
  std::map<std::string, Value> want = before;
  for (const char* gone : {"partial_0_0", "partial_1_0", "abandoned_0_0", "running_0_0"}) want.erase(gone);
  for (const char* again : {"partial", "abandoned", "running"}) want[again] = prompt_tag("pending", 9);
  EXPECT_EQ(listed_tags(controller), want);

  // What is left is served: "done" (less its failed member) and "plain"; nothing stays in flight forever.
  ReplayRequest request;
  request.partition_id = "train";
  request.global_steps = 9;
  request.batch_size = 2;
  request.options.member_status = true;
  const ReplayPass pass = controller.replay_pass(request);
  EXPECT_EQ(pass.selected_uids, (std::vector<std::string>{"plain", "done"}));  // oldest step first
  EXPECT_EQ(pass.keys, (std::vector<std::string>{"done_0_0", "plain_0_0"}));
}

TEST(ReplayReissue, WithoutMemberStatusOnlyThePromptsStatusCounts) {
  Controller controller;
  put_groups_with_members_in_flight(controller);
  const ReissuedPrompts reissued = controller.reissue_inflight_prompts("train", 9, false);
  EXPECT_EQ(reissued.keys, std::vector<std::string>{"running"});
  EXPECT_EQ(reissued.cleared_trajectories, 1);
}

TEST(ReplayReissue, WithMemberStatusAnUnknownMemberStatusIsRefusedByKeyChangingNothing) {
  Controller controller;
  put_groups_with_members_in_flight(controller);
  put(controller, "done_2_0", Value{{"status", "paused"}});
  const std::map<std::string, Value> before = listed_tags(controller);
  EXPECT_TRUE(
      throws_invalid([&] { controller.reissue_inflight_prompts("train", 9, true); }, {"member_status", "'done_2_0'"}));
  EXPECT_EQ(listed_tags(controller), before);
}

TEST(ReplayReissue, WithMemberStatusAPromptAKeptPassHoldsIsNotReissued) {
  Controller controller;
  put(controller, "a", prompt_tag("finished", 1));
  put(controller, "a_0_0", Value{{"status", "finished"}});
  ReplayRequest kept;
  kept.partition_id = "train";
  kept.global_steps = 1;
  kept.batch_size = 1;
  kept.options.member_status = true;
  kept.pass_id = 7;
  kept.lease_ms = 60000;
  ASSERT_EQ(controller.replay_pass(kept).keys, std::vector<std::string>{"a_0_0"});  // the trainer has the group
  put(controller, "a_1_0", Value{{"status", "running"}});                           // a member added late

  EXPECT_TRUE(controller.reissue_inflight_prompts("train", 2, true).keys.empty());
  EXPECT_EQ(test::listed_keys(controller, "train"), (std::set<std::string>{"a", "a_0_0", "a_1_0"}));
  EXPECT_TRUE(controller.ack_replay_pass("train", 7).acknowledged);
  EXPECT_EQ(test::listed_keys(controller, "train"), (std::set<std::string>{"a_0_0", "a_1_0"}));
}

TEST(ReplayReissue, WithMemberStatusAnUnknownStatusInAGroupInFlightIsClearedWithIt) {
  Controller controller;
  put(controller, "late", prompt_tag("running", 1));
  put(controller, "late_0_0", Value{{"status", "paused"}});
  const ReissuedPrompts reissued = controller.reissue_inflight_prompts("train", 2, true);
  EXPECT_EQ(reissued.keys, std::vector<std::string>{"late"});
  EXPECT_EQ(reissued.cleared_trajectories, 1);
}

TEST(ReplayReissue, BadArgumentsAreRefusedByName) {
  Controller controller;
  EXPECT_TRUE(throws_invalid([&] { controller.reissue_inflight_prompts("", 1, false); }, {"partition_id"}));
  EXPECT_TRUE(throws_invalid([&] { controller.reissue_inflight_prompts("train", int64_t{1} << 60, false); },
                             {"global_steps = 1152921504606846976"}));
}

}  // namespace
}  // namespace seqflow
