// A pass's view of a partition's GRPO groups as verl's V1 trainer keys them
// (prompt keys `{uid}` tagged is_prompt with their status and step, and
// trajectory keys whose uid is the text before their first '_'), read under
// the controller's lock from its ReplayIndex; and the DAPO classification of
// finished groups, computed once per group.
#pragma once

#include <cstdint>
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
// A trajectory's "status" tag (ReplayOptions::member_status): kUnknown for
// a value that is none of the five names.
enum class MemberStatus { kInFlight, kFinished, kLeftOut, kUnknown };

// verl's `tag.get("is_prompt", False)`, with Python's truth of the value.
bool is_prompt_tag(const Value& tag);
// A trajectory's tag status (read only with ReplayOptions::member_status); absent: finished.
MemberStatus member_status_of(const Value& tag);
// Throws kInvalidArgument naming up to five of `keys` (sorted): trajectories
// whose status is none of the five names.
[[noreturn]] void throw_unknown_member_statuses(std::vector<std::string> keys);
// verl's `key.split("_", 1)[0]`: a trajectory key's group.
inline std::string_view uid_of(std::string_view key) { return key.substr(0, key.find('_')); }

struct ReplayPrompt {
  std::string_view uid;  // the partition's key: valid while the pass holds the controller's lock
  uint32_t slot = 0;
  PromptStatus status = PromptStatus::kPending;
  int64_t global_steps = 0;
  // The group's start version: the smallest start policy version of its
  // trajectories (generation started then); nullopt: none yet (not started).
  std::optional<int64_t> start_version;
  // Its trajectories by MemberStatus.
  int64_t members = 0;
  int64_t members_in_flight = 0;
  int64_t members_left_out = 0;
  int64_t members_unknown = 0;
  // Differs from an earlier pass's whenever a member was filed or unfiled since.
  uint64_t member_stamp = 0;
};

struct ReplayTrajectory {
  uint32_t slot = 0;
  uint64_t arrival = 0;  // rank among the partition's keyed samples, for answers in arrival order
  MemberStatus status = MemberStatus::kFinished;
};

class ReplayIndex;

// One pass's view of a partition's groups: its terminal prompts (finished
// or failure: the only groups a pass evicts, classifies or selects) in
// arrival order, how many prompts are in flight (pending or running), the
// oldest of those by global_steps and by start version, and the
// trajectories of a uid, read from the partition's ReplayIndex.
class ReplayGroups {
 public:
  ReplayGroups() = default;  // no partition: no groups
  ReplayGroups(const ReplayIndex& index, std::vector<ReplayPrompt> terminal, int64_t in_flight,
               std::optional<int64_t> oldest_in_flight, std::optional<int64_t> oldest_in_flight_start)
      : index_(&index),
        terminal_(std::move(terminal)),
        in_flight_(in_flight),
        oldest_in_flight_(oldest_in_flight),
        oldest_in_flight_start_(oldest_in_flight_start) {}

  const std::vector<ReplayPrompt>& terminal() const { return terminal_; }
  int64_t in_flight() const { return in_flight_; }
  // The smallest global_steps of a prompt in flight; nullopt: none is.
  std::optional<int64_t> oldest_in_flight() const { return oldest_in_flight_; }
  // The smallest start version of a group in flight with a trajectory; nullopt: none is.
  std::optional<int64_t> oldest_in_flight_start() const { return oldest_in_flight_start_; }
  // For this pass, these finished prompts count as running (their group
  // filter values are not in yet).
  void hold_in_flight(const std::vector<std::string>& uids);
  // ReplayOptions::member_status: terminal prompts with a member pending or
  // running count as in flight, finished ones whose members all failed or
  // were aborted as failed. Throws kInvalidArgument naming a trajectory key
  // (up to five, sorted) whose status is none of the five names.
  void apply_member_status(const PartitionState& partition);
  // The trajectories of a uid, in arrival order; empty when it has none.
  std::vector<ReplayTrajectory> trajectories(std::string_view uid) const;
  // As trajectories(), less the failed and aborted ones when `member_status`.
  std::vector<ReplayTrajectory> served_trajectories(std::string_view uid, bool member_status) const;

 private:
  // Moves the terminal prompts `in_flight` says are in flight to the in-flight counts.
  template <typename Predicate>
  void move_in_flight(Predicate in_flight);

  const ReplayIndex* index_ = nullptr;
  std::vector<ReplayPrompt> terminal_;
  int64_t in_flight_ = 0;
  std::optional<int64_t> oldest_in_flight_;
  std::optional<int64_t> oldest_in_flight_start_;
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
// stays finished (a finished group no longer changes; with member_status,
// while its members do not change either).
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
  void forget(std::string_view uid) {
    classification_.erase(std::string(uid));
    member_stamps_.erase(std::string(uid));
  }

  // What a checkpoint keeps.
  uint32_t partition_number() const { return partition_number_; }
  const std::string& source() const { return source_; }
  const Classification& classification() const { return classification_; }

 private:
  uint32_t partition_number_ = 0;
  std::string source_;  // "tag:" and the tag, or "metric:" and the metric; "+members" with member_status
  Classification classification_;
  // member_status: each classified group's ReplayPrompt::member_stamp then;
  // a group whose members changed since is classified again. Not in
  // checkpoints: a restored classification stands until its members change.
  std::unordered_map<std::string, uint64_t> member_stamps_;
};

}  // namespace seqflow::core
