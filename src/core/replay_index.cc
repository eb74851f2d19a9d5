// Keeping a partition's replay index up to date by its keyed changes.
#include "core/replay_index.h"

#include <algorithm>
#include <optional>

#include "core/custom_meta.h"
#include "core/scan_counter.h"
#include "seqflow/error.h"

namespace seqflow::core {
namespace {

PromptStatus parse_status(const Value* status, const std::string& key) {
  if (status != nullptr && status->is_string()) {
    const std::string& name = status->as_string();
    if (name == "pending") return PromptStatus::kPending;
    if (name == "running") return PromptStatus::kRunning;
    if (name == "finished") return PromptStatus::kFinished;
    if (name == "failure") return PromptStatus::kFailure;
  }
  throw_invalid("prompt key '" + key + "' has tag status " + (status ? status->dump() : std::string("(none)")) +
                "; expected 'pending', 'running', 'finished' or 'failure'");
}

bool terminal(PromptStatus status) { return status == PromptStatus::kFinished || status == PromptStatus::kFailure; }

// The smallest value counted more often than `held` counts it; nullopt: none.
std::optional<int64_t> smallest_unheld(const std::map<int64_t, int64_t>& counts,
                                       const std::map<int64_t, int64_t>& held) {
  for (const auto& [value, count] : counts) {
    const auto found = held.find(value);
    if (count > (found == held.end() ? 0 : found->second)) return value;
  }
  return std::nullopt;
}

}  // namespace

ReplayGroups ReplayIndex::groups(PartitionState& partition, const std::unordered_set<uint32_t>& held) {
  partition.record_keyed_changes();
  const std::optional<std::vector<PartitionState::KeyedEvent>> events = partition.take_keyed_changes();
  const bool same = built_ && partition.number() == partition_number_ && partition.listing_version().epoch == epoch_;
  try {
    if (same && events) {
      catch_up(partition, *events);
    } else {
      rebuild(partition);
    }
  } catch (...) {
    built_ = false;  // half caught up: walked again next time
    throw;
  }
  std::vector<ReplayPrompt> prompts;
  prompts.reserve(terminal_.size());
  for (const auto& [arrival, slot] : terminal_) {
    if (held.count(slot) > 0) continue;
    const SlotEntry& prompt = slots_[slot];
    const GroupEntry& group = prompt.group->second;
    prompts.push_back({*partition.key_of(slot), slot, prompt.status, prompt.global_steps, group.start_version,
                       static_cast<int64_t>(group.trajectories.size()), group.members_in_flight, group.members_left_out,
                       group.members_unknown, group.member_stamp});
  }
  int64_t in_flight = in_flight_;
  std::map<int64_t, int64_t> held_steps;   // global_steps -> held prompts in flight
  std::map<int64_t, int64_t> held_starts;  // start version -> those with a trajectory
  for (uint32_t slot : held) {
    if (slot < slots_.size() && slots_[slot].kind == Kind::kPrompt && !terminal(slots_[slot].status)) {
      --in_flight;
      ++held_steps[slots_[slot].global_steps];
      if (const auto start = slots_[slot].group->second.start_version) ++held_starts[*start];
    }
  }
  return ReplayGroups(*this, std::move(prompts), in_flight, smallest_unheld(in_flight_steps_, held_steps),
                      smallest_unheld(in_flight_starts_, held_starts));
}

std::vector<ReplayTrajectory> ReplayIndex::trajectories(std::string_view uid) const {
  const auto found = groups_.find(std::string(uid));
  if (found == groups_.end()) return {};
  std::vector<ReplayTrajectory> out;
  out.reserve(found->second.trajectories.size());
  for (uint32_t slot : found->second.trajectories)
    out.push_back({slot, slots_[slot].arrival, slots_[slot].member_status});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.arrival < b.arrival; });
  return out;
}

void ReplayIndex::rebuild(PartitionState& partition) {
  built_ = false;
  slots_.clear();
  groups_.clear();
  terminal_.clear();
  in_flight_steps_.clear();
  in_flight_starts_.clear();
  in_flight_ = 0;
  next_arrival_ = 0;
  partition_number_ = partition.number();
  epoch_ = partition.listing_version().epoch;
  for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
    ++detail::replay_index_visits;
    if (partition.key_of(slot) == nullptr) continue;
    entry(slot).arrival = ++next_arrival_;
    index(partition, slot);
  }
  built_ = true;
}

void ReplayIndex::catch_up(const PartitionState& partition, const std::vector<PartitionState::KeyedEvent>& events) {
  using Change = PartitionState::KeyedChange;
  std::vector<uint32_t> changed;
  for (const auto& [slot, change] : events) {
    ++detail::replay_index_visits;
    if (change == Change::kUnkeyed) {
      unindex(slot);
      entry(slot) = {};
    } else if (change == Change::kKeyed) {
      unindex(slot);
      entry(slot).arrival = ++next_arrival_;  // a fresh sample is the partition's newest
      changed.push_back(slot);
    } else {
      changed.push_back(slot);
    }
  }
  for (uint32_t slot : changed) {
    // Once per slot, however often it changed.
    if (partition.key_of(slot) == nullptr || entry(slot).change == partition.keyed_change(slot)) continue;
    unindex(slot);
    index(partition, slot);
  }
}

void ReplayIndex::index(const PartitionState& partition, uint32_t slot) {
  const std::string& key = *partition.key_of(slot);
  const Value tag = decode_meta(partition.meta_bytes(slot));
  SlotEntry& filed = entry(slot);
  if (is_prompt_tag(tag)) {
    const Value* steps = tag.find("global_steps");
    if (steps == nullptr || !steps->is_integer() || steps->as_int() < -kMaxReplayCount ||
        steps->as_int() > kMaxReplayCount) {
      throw_invalid("prompt key '" + key + "' has tag global_steps " + (steps ? steps->dump() : "(none)") +
                    "; expected an integer of at most 2^53 in magnitude");
    }
    const PromptStatus status = parse_status(tag.find("status"), key);
    Group& group = *groups_.try_emplace(key).first;
    if (terminal(status)) {
      terminal_.emplace(filed.arrival, slot);
    } else {
      ++in_flight_steps_[steps->as_int()];
      ++in_flight_;
    }
    group.second.has_prompt = true;
    group.second.prompt_in_flight = !terminal(status);
    count_in_flight_start(group, +1);
    filed.kind = Kind::kPrompt;
    filed.status = status;
    filed.global_steps = steps->as_int();
    filed.group = &group;
  } else {
    Group& group = *groups_.try_emplace(std::string(uid_of(key))).first;
    const int64_t start = partition.versions(slot).start;
    count_in_flight_start(group, -1);
    group.second.trajectories.push_back(slot);
    group.second.start_version = std::min(group.second.start_version.value_or(start), start);
    count_in_flight_start(group, +1);
    filed.member_status = member_status_of(tag);
    count_member(group.second, filed.member_status, +1);
    group.second.member_stamp = ++last_member_stamp_;
    filed.kind = Kind::kTrajectory;
    filed.group = &group;
    filed.start_version = start;
  }
  filed.change = partition.keyed_change(slot);
}

void ReplayIndex::unindex(uint32_t slot) {
  if (slot >= slots_.size()) return;
  SlotEntry& filed = slots_[slot];
  if (filed.kind == Kind::kNone) return;
  Group& group = *filed.group;
  count_in_flight_start(group, -1);
  if (filed.kind == Kind::kPrompt && terminal(filed.status)) {
    terminal_.erase({filed.arrival, slot});
  } else if (filed.kind == Kind::kPrompt) {
    const auto steps = in_flight_steps_.find(filed.global_steps);
    if (--steps->second == 0) in_flight_steps_.erase(steps);
    --in_flight_;
  }
  if (filed.kind == Kind::kPrompt) {
    group.second.has_prompt = false;
    group.second.prompt_in_flight = false;
  } else {
    std::vector<uint32_t>& members = group.second.trajectories;
    members.erase(std::find(members.begin(), members.end(), slot));
    count_member(group.second, filed.member_status, -1);
    group.second.member_stamp = ++last_member_stamp_;
    group.second.start_version.reset();
    for (uint32_t member : members) {
      const int64_t start = slots_[member].start_version;
      group.second.start_version = std::min(group.second.start_version.value_or(start), start);
    }
    count_in_flight_start(group, +1);
  }
  erase_if_unused(group);
  filed.kind = Kind::kNone;
  filed.member_status = MemberStatus::kFinished;
  filed.group = nullptr;
  filed.change = 0;
}

void ReplayIndex::count_member(GroupEntry& group, MemberStatus status, int sign) {
  if (status == MemberStatus::kInFlight) group.members_in_flight += sign;
  if (status == MemberStatus::kLeftOut) group.members_left_out += sign;
  if (status == MemberStatus::kUnknown) group.members_unknown += sign;
}

void ReplayIndex::count_in_flight_start(const Group& group, int sign) {
  const GroupEntry& entry = group.second;
  if (!entry.prompt_in_flight || !entry.start_version) return;
  const auto counted = in_flight_starts_.try_emplace(*entry.start_version, 0).first;
  if ((counted->second += sign) == 0) in_flight_starts_.erase(counted);
}

void ReplayIndex::erase_if_unused(Group& group) {
  if (!group.second.has_prompt && group.second.trajectories.empty())
    groups_.erase(groups_.find(group.first));  // not by the key: it lives in the node
}

ReplayIndex::SlotEntry& ReplayIndex::entry(uint32_t slot) {
  if (slot >= slots_.size()) slots_.resize(static_cast<size_t>(slot) + 1);
  return slots_[slot];
}

}  // namespace seqflow::core
