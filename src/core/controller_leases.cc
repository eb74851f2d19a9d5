// Controller's fetch leases (MetaRequest::lease): ending them (acknowledged
// or released) and giving back what expired ones held.
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
  return state_->leases.next_expiry();
}

void Controller::State::expire_leases() {
  const auto now = std::chrono::steady_clock::now();
  while (const std::optional<core::FetchLeases::Expired> expired = leases.expire_next(now)) {
    give_back(expired->partition_id, expired->task_name, expired->samples.indexes, expired->samples.generations);
  }
}

}  // namespace seqflow
