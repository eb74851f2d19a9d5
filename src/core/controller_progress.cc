// Controller::progress: per partition, how many samples have each field and
// how many each task consumed.
#include "core/controller_state.h"

namespace seqflow {

std::vector<PartitionProgress> Controller::progress() const {
  std::lock_guard lock(state_->mutex);
  std::vector<PartitionProgress> out;
  for (const auto& [name, partition] : state_->data.partitions()) {
    PartitionProgress entry;
    entry.partition_id = name;
    entry.samples = partition->size();
    std::vector<size_t> produced(partition->field_count(), 0);
    for (uint32_t slot = partition->first(); slot != core::kNoSlot; slot = partition->next(slot)) {
      for (uint32_t field = 0; field < produced.size(); ++field) {
        if (partition->produced(slot, field)) ++produced[field];
      }
    }
    for (uint32_t field = 0; field < produced.size(); ++field) {
      entry.produced[partition->field_name(field)] = produced[field];
    }
    for (const auto& [task, queue] : partition->tasks()) {
      entry.consumed[task] = partition->size() - queue.unconsumed();
      if (const size_t leased = state_->leases.leased_samples(name, task)) entry.leased[task] = leased;
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace seqflow
