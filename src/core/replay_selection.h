// One pass of verl 0.9.1's V1 ReplayBuffer loop, decided over a partition's
// groups (ReplayIndex::groups) without changing anything: which groups to
// evict and why, how many prompts to refill, whether sampling is held, and
// which prompts to select. Controller::replay_pass applies the plan.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/replay_groups.h"
#include "seqflow/replay.h"

namespace seqflow::core {

// The longest a pass waits for a change (ReplayRequest::wait_ms): a minute.
inline constexpr int64_t kMaxReplayWaitMs = 60000;
// The longest lease of a kept replay pass (an hour): a peer that never
// acknowledges holds its passes' room at most this long.
inline constexpr int64_t kMaxReplayLeaseMs = 3600 * 1000;

// Throws kInvalidArgument naming the parameter and the value.
void check_replay_request(const ReplayRequest& request);
// reissue_inflight_prompts's arguments, before the lock: kInvalidArgument naming the bad one.
void check_reissue_request(const std::string& partition_id, int64_t global_steps);

// Uids as views of the partition's keys: valid while the pass holds the
// controller's lock and until it releases them.
struct ReplayPlan {
  std::vector<std::string_view> evicted;   // groups cleared whole (prompt and trajectories)
  std::vector<std::string_view> selected;  // prompts cleared (or held), their trajectories answered; oldest first
  std::vector<std::string_view> sampleable;
  int64_t refill = 0;
  bool ready = false;
  ReplayCursor cursor;
};

// `filtered`: GroupFilterCache::filtered's answer (empty without a filter
// or with eviction off); `policy_version`: the controller's current one.
ReplayPlan plan_replay_pass(const ReplayRequest& request, const ReplayGroups& groups,
                            const std::vector<std::pair<std::string, double>>& filtered, int64_t policy_version);

}  // namespace seqflow::core
