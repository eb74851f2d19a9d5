// A partition's GRPO groups as verl's V1 trainer keys them: prompt keys
// `{uid}` (tag is_prompt) with their status and step, and trajectory keys
// whose uid is the text before their first '_'. Read under the controller's
// lock from the keys' tags, each tag parsed once per change of it; and the
// DAPO classification of finished groups, computed once per group.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/partition_state.h"
#include "seqflow/replay.h"

namespace seqflow::core {

enum class PromptStatus { kPending, kRunning, kFinished, kFailure };

// verl's `tag.get("is_prompt", False)`, with Python's truth of the value.
bool is_prompt_tag(const Value& tag);
// verl's `key.split("_", 1)[0]`: a trajectory key's group.
inline std::string_view uid_of(std::string_view key) { return key.substr(0, key.find('_')); }

struct ReplayPrompt {
  std::string_view uid;  // the partition's key: valid while the pass holds the controller's lock
  uint32_t slot = 0;
  PromptStatus status = PromptStatus::kPending;
  int64_t global_steps = 0;
};

struct ReplayTrajectory {
  uint32_t slot = 0;
  size_t arrival = 0;  // rank among the partition's samples, for answers in arrival order
};

class ReplayTagCache;

// One pass's view of a partition's groups: its prompts in arrival order, and
// the trajectories of its terminal ones (the only groups a pass evicts,
// classifies or selects), found on first use (one walk over the samples) so
// that a pass that needs none (idle, count) does not walk them.
class ReplayGroups {
 public:
  ReplayGroups() = default;  // no partition: no groups
  ReplayGroups(const PartitionState& partition, const ReplayTagCache& tags, std::vector<ReplayPrompt> prompts)
      : partition_(&partition), tags_(&tags), prompts_(std::move(prompts)) {}

  const std::vector<ReplayPrompt>& prompts() const { return prompts_; }
  // For this pass, these finished prompts count as running (their group
  // filter values are not in yet).
  void hold_in_flight(const std::vector<std::string>& uids);
  // The trajectories of a terminal prompt's uid, in arrival order; null when
  // it has none (or the uid is no terminal prompt's).
  const std::vector<ReplayTrajectory>* trajectories(std::string_view uid) const;

 private:
  const PartitionState* partition_ = nullptr;
  const ReplayTagCache* tags_ = nullptr;
  std::vector<ReplayPrompt> prompts_;
  mutable std::optional<std::unordered_map<std::string_view, std::vector<ReplayTrajectory>>> trajectories_;
};

// Per partition: each keyed sample's tag as replay reads it, parsed again only
// when it changed (PartitionState::keyed_change), and the prompts in arrival
// order, walked again only when the partition's keys or tags changed (its
// listing version): a pass over an unchanged partition decodes nothing.
class ReplayTagCache {
 public:
  // Throws kInvalidArgument naming the key for a prompt whose status is not
  // one of verl's four or whose global_steps is not an integer. Prompts for
  // which `held` (when set) is true are left out: a kept pass holds them.
  ReplayGroups scan(const PartitionState& partition, const std::function<bool(uint32_t slot)>& held);
  // Whether the keyed slot holds a prompt key (held or not), as of the last scan.
  bool prompt(uint32_t slot) const { return slot < slots_.size() && slots_[slot].kind == Kind::kPrompt; }

 private:
  enum class Kind : uint8_t { kTrajectory, kPrompt };
  struct SlotTag {
    uint64_t change = 0;  // the keyed_change parsed; 0: none
    Kind kind = Kind::kTrajectory;
    PromptStatus status = PromptStatus::kPending;
    int64_t global_steps = 0;
  };
  // The walk over every sample when the listing changed.
  void walk(const PartitionState& partition);

  uint32_t partition_number_ = 0;
  std::optional<ListingVersion> walked_;  // the listing the prompts below are of
  std::vector<SlotTag> slots_;
  std::vector<uint32_t> prompt_slots_;  // in arrival order
};

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
  using Classification = std::unordered_map<std::string, std::optional<double>>;  // uid -> value; nullopt: kept

  GroupFilterCache() = default;
  // Restored from a checkpoint, for the partition numbered `partition_number`.
  GroupFilterCache(uint32_t partition_number, std::string source, Classification classification)
      : partition_number_(partition_number), source_(std::move(source)), classification_(std::move(classification)) {}

  // Throws kInvalidArgument (naming up to five uids, sorted) when a newly
  // finished group has no trajectory, or (tag) a trajectory without a
  // number under the tag.
  GroupFilterAnswer filtered(const PartitionState& partition, const ReplayGroups& groups, const ReplayOptions& options,
                             const std::vector<std::pair<std::string, std::vector<double>>>& supplied);
  void forget(std::string_view uid) { classification_.erase(std::string(uid)); }

  // What a checkpoint keeps.
  uint32_t partition_number() const { return partition_number_; }
  const std::string& source() const { return source_; }
  const Classification& classification() const { return classification_; }

 private:
  uint32_t partition_number_ = 0;
  std::string source_;  // "tag:" and the tag, or "metric:" and the metric
  Classification classification_;
};

}  // namespace seqflow::core
