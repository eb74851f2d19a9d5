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
#include "seqflow/replay.h"

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

// What a pass's group filter found: the filtered groups with the value each
// shared, in the prompts' arrival order, and (values supplied by the
// client) the finished groups it has no values for yet, with their
// trajectory keys.
struct GroupFilterAnswer {
  std::vector<std::pair<std::string, double>> filtered;
  std::vector<std::string> unclassified_uids;
  std::vector<std::string> unclassified_keys;
};

// DAPO classification of finished groups, as verl 0.9.1 computes it: a group
// of more than one trajectory whose values have numpy's standard deviation
// 0.0 is filtered. The values are a tag of each trajectory
// (options.group_filter_tag) or supplied by the client per group
// (options.group_filter_metric, `supplied`: one value per trajectory, or
// the group is asked for again). A group is classified the first time a
// pass sees it finished with its values, and the result kept while it
// stays finished (a finished group no longer changes).
class GroupFilterCache {
 public:
  // Throws kInvalidArgument (naming up to five uids, sorted) when a newly
  // finished group has no trajectory, or (tag) a trajectory without a
  // number under the tag.
  GroupFilterAnswer filtered(const PartitionState& partition, const ReplayGroups& groups, const ReplayOptions& options,
                             const std::vector<std::pair<std::string, std::vector<double>>>& supplied);
  void forget(const std::string& uid) { classification_.erase(uid); }

 private:
  uint32_t partition_number_ = 0;
  std::string source_;  // "tag:" and the tag, or "metric:" and the metric
  std::unordered_map<std::string, std::optional<double>> classification_;  // nullopt: kept
};

}  // namespace seqflow::core
