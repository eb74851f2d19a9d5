// Controller::replay_pass's staleness by policy version
// (ReplayOptions::max_staleness_versions): a group's start version is the
// smallest start version of its trajectories (the prompt key's own does not
// count); `drop` evicts a stale finished group, `wait` holds sampling while a
// stale group with a trajectory is in flight.
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

using test::throws_invalid;

// A trajectory of the group, inserted at the controller's current policy version.
void trajectory(Controller& controller, const std::string& uid, int index) {
  controller.kv_resolve("train", std::vector<std::string>{uid + "_" + std::to_string(index) + "_0"},
                        std::vector<Value>{Value{{"reward", index}}});
}

ReplayRequest async_request(int64_t batch_size, int64_t max_staleness_versions, StalenessStrategy strategy) {
  ReplayRequest made;
  made.partition_id = "train";
  made.global_steps = 1;
  made.batch_size = batch_size;
  made.options.max_staleness_versions = max_staleness_versions;
  made.options.strategy = strategy;
  return made;
}

TEST(ReplayStaleness, DropEvictsAGroupByItsOldestTrajectoryNotByItsPromptKey) {
  Controller controller;
  const int64_t max_staleness = 2;
  const int64_t old_start = 0;
  replay_prompt(controller, "stale", "running", 1);
  replay_prompt(controller, "fresh", "running", 1);  // its prompt key starts at old_start too
  trajectory(controller, "stale", 0);                // starts at old_start
  const int64_t fresh_start = 3;
  controller.set_policy_version(fresh_start);
  trajectory(controller, "stale", 1);
  trajectory(controller, "fresh", 0);
  trajectory(controller, "fresh", 1);
  const int64_t current = fresh_start + max_staleness;  // fresh lags exactly max_staleness: not stale
  controller.set_policy_version(current);
  replay_prompt(controller, "stale", "finished", 1);
  replay_prompt(controller, "fresh", "finished", 1);

  ReplayRequest asked = async_request(1, max_staleness, StalenessStrategy::kDrop);
  asked.options.max_off_policy_threshold = 100;  // both controls on: global_steps finds nothing stale
  const ReplayPass first = controller.replay_pass(asked);
  EXPECT_FALSE(first.ready);
  EXPECT_EQ(first.refill, 1);
  const ReplayEvictions& evicted = first.cursor.evictions;
  EXPECT_EQ(evicted.stale_versions, 1);
  EXPECT_EQ(evicted.stale_versions_age_max, current - old_start);
  EXPECT_EQ(evicted.stale, 0);
  const std::set<std::string> left = test::replay_keys(controller);
  EXPECT_EQ(left.count("stale") + left.count("stale_0_0") + left.count("stale_1_0"), 0u);  // the whole group
  const auto metrics = evicted.metrics("training");
  ASSERT_EQ(metrics.size(), 2u);  // verl's global_steps metrics only with their evictions
  EXPECT_EQ(metrics[0], (std::pair<std::string, double>{"training/off_policy/version_evicted_samples", 1.0}));
  EXPECT_EQ(metrics[1], (std::pair<std::string, double>{"training/off_policy/version_evicted_samples_age/max",
                                                        static_cast<double>(current - old_start)}));

  asked.cursor = first.cursor;
  const ReplayPass second = controller.replay_pass(asked);
  EXPECT_EQ(second.selected_uids, std::vector<std::string>{"fresh"});
  EXPECT_EQ(second.cursor.evictions.stale_versions, 1);  // carried, not counted again
}

TEST(ReplayStaleness, AGroupLaggingExactlyTheBoundIsNotStaleOneVersionMoreIs) {
  for (const int64_t lag : {0, 1}) {
    SCOPED_TRACE("lag " + std::to_string(lag));
    Controller controller;
    const int64_t max_staleness = 0;
    replay_prompt(controller, "g", "running", 1);
    trajectory(controller, "g", 0);
    controller.set_policy_version(lag);
    replay_prompt(controller, "g", "finished", 1);
    const ReplayPass pass = controller.replay_pass(async_request(1, max_staleness, StalenessStrategy::kDrop));
    const bool stale = lag > max_staleness;
    EXPECT_EQ(pass.cursor.evictions.stale_versions, stale ? 1 : 0);
    EXPECT_EQ(pass.selected_uids, stale ? std::vector<std::string>{} : std::vector<std::string>{"g"});
  }
}

// A trajectory cleared from a group moves its start version to the oldest
// one left (the index keeps it by its changes).
TEST(ReplayStaleness, AGroupsStartVersionFollowsTheTrajectoriesItStillHas) {
  Controller controller;
  replay_prompt(controller, "g", "running", 1);
  trajectory(controller, "g", 0);
  const int64_t later_start = 2;
  controller.set_policy_version(later_start);
  trajectory(controller, "g", 1);
  controller.set_policy_version(later_start + 1);
  const ReplayRequest evict = [] {
    ReplayRequest made = async_request(0, 1, StalenessStrategy::kWait);
    made.step = ReplayStep::kEvict;
    return made;
  }();
  EXPECT_FALSE(controller.replay_pass(evict).ready) << "g started at 0: 3 versions behind, in flight";
  controller.kv_clear("train", std::vector<std::string>{"g_0_0"});
  EXPECT_TRUE(controller.replay_pass(evict).ready) << "g starts at 2 now: 1 version behind";
}

TEST(ReplayStaleness, WaitHoldsSamplingWhileAStaleGroupIsInFlightThenReleasesWhenItFinishes) {
  Controller controller;
  const int64_t max_staleness = 1;
  replay_prompt(controller, "slow", "running", 0);
  trajectory(controller, "slow", 0);
  replay_prompt(controller, "unstarted", "pending", 0);  // no trajectory: not started, never stale
  controller.set_policy_version(max_staleness + 1);
  replay_prompt(controller, "done", "finished", 1);
  trajectory(controller, "done", 0);
  trajectory(controller, "done", 1);

  const ReplayRequest asked = async_request(1, max_staleness, StalenessStrategy::kWait);
  const ReplayPass held = controller.replay_pass(asked);
  EXPECT_FALSE(held.ready);
  EXPECT_EQ(held.refill, 0);
  EXPECT_EQ(held.cursor.evictions.stale_versions, 0);  // waited for, not dropped
  replay_prompt(controller, "slow", "finished", 0);
  const ReplayPass released = controller.replay_pass(asked);
  EXPECT_EQ(released.selected_uids, std::vector<std::string>{"slow"});  // oldest first, not dropped
}

TEST(ReplayStaleness, BadValuesAreRefusedByName) {
  Controller controller;
  ReplayRequest asked = async_request(1, -1, StalenessStrategy::kDrop);
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(asked); }, {"max_staleness_versions = -1", ">= 0"}));
  asked.options.max_staleness_versions = kMaxReplayCount + 1;
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(asked); }, {"max_staleness_versions", "2^53"}));
  asked.options.max_staleness_versions = 2;
  asked.options.mode = ReplayMode::kSync;
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(asked); }, {"max_staleness_versions = 2", "'async'"}));
  asked.options.mode = ReplayMode::kAsync;
  asked.cursor.evictions.stale_versions = -1;
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(asked); }, {"cursor.evictions.stale_versions = -1"}));
  asked.cursor.evictions.stale_versions = 0;
  asked.cursor.evictions.stale_versions_age_max = kMaxReplayCount + 1;
  EXPECT_TRUE(throws_invalid([&] { controller.replay_pass(asked); }, {"cursor.evictions.stale_versions_age_max"}));
}

}  // namespace
}  // namespace seqflow
