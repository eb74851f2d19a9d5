// Per partition, what replay passes read, kept up to date by the
// partition's keyed changes (PartitionState::take_keyed_changes) rather than
// by walking its samples: each keyed sample's tag as replay reads it (parsed
// once per change of it), the trajectory slots of each uid, the terminal
// prompts in arrival order, the prompts in flight counted by global_steps
// and, of those whose group has a trajectory, by the group's start version
// (the smallest start policy version of its trajectories). A pass costs the changed keys and the terminal prompts, not
// the stored keys; a walk over every sample happens once, and again only
// when the changes outgrew the partition (or it is another partition).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/partition_state.h"
#include "core/replay_groups.h"

namespace seqflow::core {

class ReplayIndex {
 public:
  // Catches up with the partition, then answers. Throws kInvalidArgument
  // naming the key for a prompt whose status is not one of verl's four or
  // whose global_steps is not an integer (and catches up again next time).
  // Prompts in `held` (slots a kept pass holds) are left out.
  ReplayGroups groups(PartitionState& partition, const std::unordered_set<uint32_t>& held);
  // A uid's trajectory slots with their arrival ranks, in arrival order.
  std::vector<ReplayTrajectory> trajectories(std::string_view uid) const;

 private:
  enum class Kind : uint8_t { kNone, kTrajectory, kPrompt };
  struct GroupEntry {
    std::vector<uint32_t> trajectories;
    std::optional<int64_t> start_version;  // the smallest of its trajectories'; nullopt: none yet
    bool has_prompt = false;
    bool prompt_in_flight = false;
    // Its trajectories by MemberStatus other than kFinished.
    int64_t members_in_flight = 0;
    int64_t members_left_out = 0;
    int64_t members_unknown = 0;
    uint64_t member_stamp = 0;  // changed (to a value never used before) whenever a member is filed or unfiled
  };
  using Group = std::pair<const std::string, GroupEntry>;  // by uid
  struct SlotEntry {
    uint64_t change = 0;     // the keyed_change indexed; 0: none
    uint64_t arrival = 0;    // rank among the partition's keyed samples
    Group* group = nullptr;  // a trajectory's, or a prompt's own (its key is its uid)
    int64_t global_steps = 0;
    int64_t start_version = 0;  // a trajectory's (a sample's start version never changes while it is keyed)
    Kind kind = Kind::kNone;
    PromptStatus status = PromptStatus::kPending;
    MemberStatus member_status = MemberStatus::kFinished;  // a trajectory's
  };

  void rebuild(PartitionState& partition);
  void catch_up(const PartitionState& partition, const std::vector<PartitionState::KeyedEvent>& events);
  // Parses the slot's tag and files the slot; throws for a bad prompt tag.
  void index(const PartitionState& partition, uint32_t slot);
  void unindex(uint32_t slot);
  SlotEntry& entry(uint32_t slot);
  // Adds (+1) or withdraws (-1) a trajectory's status in its group's member counts.
  static void count_member(GroupEntry& group, MemberStatus status, int sign);
  // Adds (+1) or withdraws (-1) the group's count in in_flight_starts_, before and after it changes.
  void count_in_flight_start(const Group& group, int sign);
  // Erases the group once neither a prompt nor a trajectory refers to it.
  void erase_if_unused(Group& group);

  bool built_ = false;
  uint32_t partition_number_ = 0;
  uint64_t epoch_ = 0;
  uint64_t next_arrival_ = 0;
  std::vector<SlotEntry> slots_;
  std::unordered_map<std::string, GroupEntry> groups_;
  std::set<std::pair<uint64_t, uint32_t>> terminal_;  // (arrival, slot) of finished and failure prompts
  std::map<int64_t, int64_t> in_flight_steps_;        // global_steps -> pending and running prompts
  std::map<int64_t, int64_t> in_flight_starts_;       // start version -> those prompts with a trajectory
  int64_t in_flight_ = 0;
  uint64_t last_member_stamp_ = 0;  // across rebuilds too: a stamp is never reused
};

}  // namespace seqflow::core
