// A partition's GRPO groups as verl's V1 trainer keys them: prompt keys
// `{uid}` (tag is_prompt) with their status and step, and trajectory keys
// whose uid is the text before their first '_'. Read under the controller's
// lock from the keys' tags; and the DAPO classification of finished groups,
// computed once per group.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/partition_state.h"

namespace seqflow::core {

enum class PromptStatus { kPending, kRunning, kFinished, kFailure };

struct ReplayPrompt {
  std::string uid;
  uint32_t slot = 0;
  PromptStatus status = PromptStatus::kPending;
  int64_t global_steps = 0;
};

struct ReplayTrajectory {
  uint32_t slot = 0;
  size_t arrival = 0;  // rank among the partition's keys, for answers in arrival order
};

struct ReplayGroups {
  std::vector<ReplayPrompt> prompts;                                            // in arrival order
  std::unordered_map<std::string, std::vector<ReplayTrajectory>> trajectories;  // by uid, in arrival order
};

// Throws kInvalidArgument naming the key for a prompt whose status is not
// one of verl's four or whose global_steps is not an integer.
ReplayGroups scan_replay_groups(const PartitionState& partition);

// DAPO classification of finished groups: a group whose trajectories (more
// than one) all carry the same number under the filter tag is filtered. A
// group is classified the first time a pass sees it finished and the result
// kept while it stays finished (a finished group no longer changes).
class GroupFilterCache {
 public:
  // The filtered groups among `groups`' finished prompts, with the value
  // each shared, in the prompts' arrival order. Throws kInvalidArgument
  // (naming up to five uids, sorted) when a newly finished group has a
  // trajectory without a number under `tag`, or no trajectory.
  std::vector<std::pair<std::string, double>> filtered(const PartitionState& partition, const ReplayGroups& groups,
                                                       const std::string& tag);
  void forget(const std::string& uid) { classification_.erase(uid); }

 private:
  uint32_t partition_number_ = 0;
  std::string tag_;
  std::unordered_map<std::string, std::optional<double>> classification_;  // nullopt: kept
};

}  // namespace seqflow::core
