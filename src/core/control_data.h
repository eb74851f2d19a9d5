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
  // A new incarnation: a random id, and generations from a random base, so
  // that no BatchMeta or stored value from an earlier controller matches.
  ControlData();

  PartitionState* find(const std::string& name);
  const PartitionState* find(const std::string& name) const;
  // Throws kNotFound naming the partition.
  PartitionState& require(const std::string& name);
  const PartitionState& require(const std::string& name) const;
  PartitionState& find_or_create(const std::string& name);
  // Drops the partition and releases its global indexes; returns them ascending.
  std::vector<int64_t> erase(const std::string& name);
  const std::map<std::string, std::unique_ptr<PartitionState>>& partitions() const { return partitions_; }
  // Every partition, oldest first: the order TransferQueue lists them in, and
  // the order checkpoints keep.
  std::vector<const PartitionState*> in_creation_order() const;

  // The slot of a live sample of `partition`, or nullopt.
  std::optional<uint32_t> slot_of(const PartitionState& partition, int64_t global_index) const;
  // The slot of the sample a BatchMeta names by partition, global index and
  // generation (0: not known, any generation is taken): nullopt when the
  // index is no live sample of the partition; throws kStaleSample when it
  // is one, of another generation.
  std::optional<uint32_t> named_slot(const PartitionState& partition, int64_t global_index, uint64_t generation) const;
  // Slots of all given samples (generations: one per index, or empty when
  // not known); throws kStaleSample naming the first that is not the live
  // sample the caller means. Nothing changes either way.
  std::vector<uint32_t> require_slots(const PartitionState& partition, std::span<const int64_t> global_indexes,
                                      std::span<const uint64_t> generations) const;
  // The partition and require_slots() of the samples a BatchMeta names; a
  // partition that does not exist: kStaleSample naming the first sample
  // (kNotFound naming the partition when there is none).
  std::pair<PartitionState*, std::vector<uint32_t>> require_samples(const std::string& partition_id,
                                                                    std::span<const int64_t> global_indexes,
                                                                    std::span<const uint64_t> generations);
  uint64_t generation(int64_t global_index) const { return indexes_.generation(global_index); }

  // `count` new samples as one put call (their GRPO grouping unit).
  NewSamples add_samples(PartitionState& partition, int64_t count);
  // Releases the samples' global indexes and slots (each once); returns the
  // released indexes, ascending.
  std::vector<int64_t> remove_samples(PartitionState& partition, std::vector<uint32_t> slots);
  // remove_samples of distinct slots, answering nothing: cannot fail once
  // the partition has room to free them (add_samples makes it for its own).
  void discard_samples(PartitionState& partition, std::span<const uint32_t> slots) noexcept;
  // Checkpoint load: a sample with a given global index and generation
  // (nullopt: a new one, for checkpoints written before generations); false
  // if the index is taken.
  bool restore_sample(PartitionState& partition, int64_t global_index, std::optional<uint64_t> generation,
                      uint32_t put_id, uint32_t put_pos, uint32_t* slot);

  // The trainer's current policy version (Controller::set_policy_version):
  // new samples start at it, and a put that completes one finishes it there.
  int64_t policy_version() const { return policy_version_; }
  void set_policy_version(int64_t version) { policy_version_ = version; }

  const IndexAllocator& indexes() const { return indexes_; }
  void set_next_generation(uint64_t next) { indexes_.set_next_generation(next); }
  // A write version (seqflow/field_versions.h): drawn from the generation
  // sequence, so it outgrows every earlier one even after a checkpoint load.
  uint64_t new_write_version() { return indexes_.take_generation(); }
  // Names this controller's data to the storage units: a unit drops what it
  // holds from another incarnation (a controller restarted without a
  // checkpoint). Checkpoints keep it.
  uint64_t incarnation() const { return incarnation_; }
  void set_incarnation(uint64_t incarnation) { incarnation_ = incarnation; }

 private:
  IndexAllocator indexes_;
  uint64_t incarnation_;
  int64_t policy_version_ = 0;
  std::map<std::string, std::unique_ptr<PartitionState>> partitions_;
  uint32_t next_partition_number_ = 0;
};

// Checks `generations` holds one per index or none; throws kInvalidArgument.
void check_generations(std::span<const int64_t> global_indexes, std::span<const uint64_t> generations);
// Throws kInvalidArgument naming `parameter`, the position and the value of
// the first index outside [0, kMaxGlobalIndex].
void check_global_indexes(std::span<const int64_t> global_indexes, const char* parameter);

// Throws kInvalidArgument naming `version` unless 0 <= version <=
// kMaxPolicyVersion.
void check_policy_version(int64_t version);

// Throws kInvalidArgument unless 0 < count <= the most one call may add.
void check_sample_count(int64_t count, const char* parameter);

}  // namespace seqflow::core
