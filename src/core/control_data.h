// The controller's data: partitions and the global index table. Not locked
// here; the controller holds its mutex around every use. A checkpoint load
// builds a fresh ControlData and swaps it in whole.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/index_allocator.h"
#include "core/partition_state.h"

namespace seqflow::core {

struct NewSamples {
  std::vector<int64_t> global_indexes;
  std::vector<uint32_t> slots;
};

class ControlData {
 public:
  PartitionState* find(const std::string& name);
  const PartitionState* find(const std::string& name) const;
  // Throws kNotFound naming the partition.
  PartitionState& require(const std::string& name);
  const PartitionState& require(const std::string& name) const;
  PartitionState& find_or_create(const std::string& name);
  // Drops the partition and releases its global indexes; returns them ascending.
  std::vector<int64_t> erase(const std::string& name);
  const std::map<std::string, std::unique_ptr<PartitionState>>& partitions() const {
    return partitions_;
  }
  // Every partition, oldest first: the order TransferQueue lists them in, and
  // the order checkpoints keep.
  std::vector<const PartitionState*> in_creation_order() const;

  // The slot of a live sample of `partition`, or nullopt.
  std::optional<uint32_t> slot_of(const PartitionState& partition, int64_t global_index) const;
  // Slots of all given samples; throws kNotFound naming the first that is not
  // a live sample of the partition. Nothing changes either way.
  std::vector<uint32_t> require_slots(const PartitionState& partition,
                                      std::span<const int64_t> global_indexes) const;

  // `count` new samples as one put call (their GRPO grouping unit).
  NewSamples add_samples(PartitionState& partition, int64_t count);
  // Releases the samples' global indexes and slots (each once); returns the
  // released indexes, ascending.
  std::vector<int64_t> remove_samples(PartitionState& partition, std::vector<uint32_t> slots);
  // Checkpoint load: a sample with a given global index; false if taken.
  bool restore_sample(PartitionState& partition, int64_t global_index, uint32_t put_id,
                      uint32_t put_pos, uint32_t* slot);

  const IndexAllocator& indexes() const { return indexes_; }

 private:
  IndexAllocator indexes_;
  std::map<std::string, std::unique_ptr<PartitionState>> partitions_;
  uint32_t next_partition_number_ = 0;
};

// Throws kInvalidArgument unless 0 < count <= the most one call may add.
void check_sample_count(int64_t count, const char* parameter);

}  // namespace seqflow::core
