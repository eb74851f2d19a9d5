// Controller's fetch leases (MetaRequest::lease): ending them (acknowledged
// or released) and giving back what expired ones held; and the end of kept
// replay passes' leases, told to watchers.
#include <algorithm>
#include <optional>
#include <unordered_set>

#include "core/controller_state.h"
#include "seqflow/controller.h"

namespace seqflow {

size_t Controller::end_leases(const std::string& partition_id, const std::string& task_name,
                              std::span<const int64_t> global_indexes, std::span<const uint64_t> generations,
                              bool release, uint64_t lease) {
  core::check_generations(global_indexes, generations);
  std::lock_guard lock(state_->mutex);
  state_->expire_leases();  // an acknowledgement that comes too late ends nothing
  const core::FetchLeases::Samples ended =
      state_->leases.end(partition_id, task_name, global_indexes, generations, lease);
  if (release) state_->give_back(partition_id, task_name, ended.indexes, ended.generations);
  return ended.size();
}

std::optional<std::chrono::steady_clock::time_point> Controller::expire_leases() {
  std::lock_guard lock(state_->mutex);
  state_->expire_leases();
  state_->expire_replay_passes();
  const auto fetch = state_->leases.next_expiry();
  const auto replay = state_->replay_leases.next_expiry();
  if (fetch && replay) return std::min(*fetch, *replay);
  return fetch ? fetch : replay;
}

void Controller::State::expire_leases() {
  const auto now = std::chrono::steady_clock::now();
  while (const std::optional<core::FetchLeases::Expired> expired = leases.expire_next(now)) {
    give_back(expired->partition_id, expired->task_name, expired->samples.indexes, expired->samples.generations);
  }
}

void Controller::State::expire_replay_passes() {
  for (auto& [partition_id, prompts] : replay_leases.expire(core::ReplayLeases::Clock::now())) {
    const core::PartitionState* partition = data.find(partition_id);
    if (partition == nullptr) continue;
    std::vector<uint32_t> slots;
    for (const core::ReplayLeases::Prompt& prompt : prompts) {
      // Skipped when cleared meanwhile (and its index perhaps reused).
      const auto slot = data.slot_of(*partition, prompt.global_index);
      if (slot && data.generation(prompt.global_index) == prompt.generation) slots.push_back(*slot);
    }
    if (slots.empty()) continue;
    change_logs.record(partition_id, *partition, ChangeKind::kTagged, slots, true);
    notify_changed(&partition_id);
  }
}

std::unordered_set<uint32_t> Controller::State::held_replay_slots(const core::PartitionState& partition) const {
  std::unordered_set<uint32_t> slots;
  if (const core::ReplayLeases::Held* prompts = replay_leases.held(partition.name())) {
    for (const auto& [index, generation] : *prompts) {
      const std::optional<uint32_t> slot = data.slot_of(partition, index);
      if (slot && data.generation(index) == generation) slots.insert(*slot);
    }
  }
  return slots;
}

}  // namespace seqflow
