#include "core/control_data.h"

#include <algorithm>
#include <utility>

#include "common/random_id.h"
#include "common/stale_sample.h"
#include "core/name_rule.h"
#include "seqflow/limits.h"
#include "seqflow/error.h"

namespace seqflow::core {
namespace {

// Slots are 32-bit; keep well clear of kNoSlot.
constexpr int64_t kMaxSamplesPerPartition = int64_t{1} << 31;

// Generations start below 2^62, leaving room to count past any job's
// allocations (and the jumps of checkpoint loads) without wrapping.
uint64_t random_first_generation() { return (random_u64() >> 2) | 1; }

}  // namespace

ControlData::ControlData() : indexes_(random_first_generation()), incarnation_(random_u64() | 1) {}

void check_generations(std::span<const int64_t> global_indexes, std::span<const uint64_t> generations) {
  if (!generations.empty() && generations.size() != global_indexes.size()) {
    throw_invalid("generations holds " + std::to_string(generations.size()) + " entries for " +
                  std::to_string(global_indexes.size()) + " global indexes; give one per index, or none");
  }
}

void check_global_indexes(std::span<const int64_t> global_indexes, const char* parameter) {
  for (size_t i = 0; i < global_indexes.size(); ++i) {
    if (global_indexes[i] < 0 || global_indexes[i] > kMaxGlobalIndex) {
      throw_invalid(std::string(parameter) + "[" + std::to_string(i) + "] = " + std::to_string(global_indexes[i]) +
                    " is not a global index (0.." + std::to_string(kMaxGlobalIndex) + ")");
    }
  }
}

void check_sample_count(int64_t count, const char* parameter) {
  if (count <= 0 || count > kMaxSamplesPerPartition) {
    throw_invalid(std::string(parameter) + " must be in [1, " + std::to_string(kMaxSamplesPerPartition) + "], got " +
                  std::to_string(count));
  }
}

void check_policy_version(int64_t version) {
  if (version < 0 || version > kMaxPolicyVersion) {
    throw_invalid("version must be in [0, " + std::to_string(kMaxPolicyVersion) + "], got " + std::to_string(version));
  }
}

PartitionState* ControlData::find(const std::string& name) {
  auto it = partitions_.find(name);
  return it == partitions_.end() ? nullptr : it->second.get();
}

const PartitionState* ControlData::find(const std::string& name) const {
  auto it = partitions_.find(name);
  return it == partitions_.end() ? nullptr : it->second.get();
}

PartitionState& ControlData::require(const std::string& name) {
  return const_cast<PartitionState&>(std::as_const(*this).require(name));
}

const PartitionState& ControlData::require(const std::string& name) const {
  const PartitionState* partition = find(name);
  if (partition == nullptr) {
    throw Error(ErrorCode::kNotFound, "partition_id '" + name + "' does not exist");
  }
  return *partition;
}

PartitionState& ControlData::find_or_create(const std::string& name) {
  check_name(name, "partition_id");
  if (PartitionState* found = find(name)) return *found;
  // Made first, then listed: out of memory on either, nothing is listed (an
  // empty entry would be a partition without state).
  auto made = std::make_unique<PartitionState>(name, next_partition_number_);
  PartitionState& partition = *made;
  partitions_.emplace(name, std::move(made));
  ++next_partition_number_;
  return partition;
}

std::vector<const PartitionState*> ControlData::in_creation_order() const {
  std::vector<const PartitionState*> out;
  out.reserve(partitions_.size());
  for (const auto& entry : partitions_) out.push_back(entry.second.get());
  std::sort(out.begin(), out.end(),
            [](const PartitionState* a, const PartitionState* b) { return a->number() < b->number(); });
  return out;
}

std::vector<int64_t> ControlData::erase(const std::string& name) {
  const PartitionState& partition = require(name);
  std::vector<int64_t> released;
  released.reserve(partition.size());
  for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
    released.push_back(partition.global_index(slot));
    indexes_.release(released.back());
  }
  partitions_.erase(name);
  std::sort(released.begin(), released.end());
  return released;
}

std::optional<uint32_t> ControlData::slot_of(const PartitionState& partition, int64_t global_index) const {
  auto where = indexes_.find(global_index);
  if (!where || where->partition != partition.number()) return std::nullopt;
  return where->slot;
}

std::optional<uint32_t> ControlData::named_slot(const PartitionState& partition, int64_t global_index,
                                                uint64_t generation) const {
  auto slot = slot_of(partition, global_index);
  if (slot && generation != 0 && indexes_.generation(global_index) != generation) {
    throw_sample_reused(partition.name(), global_index, generation, indexes_.generation(global_index));
  }
  return slot;
}

std::vector<uint32_t> ControlData::require_slots(const PartitionState& partition,
                                                 std::span<const int64_t> global_indexes,
                                                 std::span<const uint64_t> generations) const {
  check_generations(global_indexes, generations);
  std::vector<uint32_t> slots;
  slots.reserve(global_indexes.size());
  for (size_t i = 0; i < global_indexes.size(); ++i) {
    const uint64_t generation = generations.empty() ? 0 : generations[i];
    auto slot = named_slot(partition, global_indexes[i], generation);
    if (!slot) throw_sample_gone(partition.name(), global_indexes[i], generation);
    slots.push_back(*slot);
  }
  return slots;
}

std::pair<PartitionState*, std::vector<uint32_t>> ControlData::require_samples(const std::string& partition_id,
                                                                               std::span<const int64_t> global_indexes,
                                                                               std::span<const uint64_t> generations) {
  check_generations(global_indexes, generations);
  PartitionState* partition = find(partition_id);
  if (partition == nullptr && !global_indexes.empty()) {
    throw_sample_gone(partition_id, global_indexes.front(), generations.empty() ? 0 : generations.front());
  }
  if (partition == nullptr) partition = &require(partition_id);
  return {partition, require_slots(*partition, global_indexes, generations)};
}

NewSamples ControlData::add_samples(PartitionState& partition, int64_t count) {
  check_sample_count(count, "count");
  if (static_cast<int64_t>(partition.size()) + count > kMaxSamplesPerPartition) {
    throw_invalid("partition '" + partition.name() + "' would exceed " + std::to_string(kMaxSamplesPerPartition) +
                  " samples");
  }
  // Every allocation first: from allocate() on nothing can fail, so a
  // failed insert (out of memory) leaves no sample behind.
  NewSamples out;
  out.slots.reserve(static_cast<size_t>(count));
  indexes_.reserve(count);
  partition.reserve_samples(static_cast<size_t>(count));
  partition.reserve_removals(static_cast<size_t>(count));  // so that undoing the insert cannot fail (InsertUndo)
  out.global_indexes = indexes_.allocate(count);
  const uint32_t put_id = partition.new_put_id();
  for (size_t i = 0; i < out.global_indexes.size(); ++i) {
    const uint32_t slot =
        partition.add_sample(out.global_indexes[i], put_id, static_cast<uint32_t>(i), policy_version_);
    indexes_.bind(out.global_indexes[i], Location{partition.number(), slot});
    out.slots.push_back(slot);
  }
  return out;
}

std::vector<int64_t> ControlData::remove_samples(PartitionState& partition, std::vector<uint32_t> slots) {
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  std::vector<int64_t> released;
  released.reserve(slots.size());
  for (uint32_t slot : slots) released.push_back(partition.global_index(slot));
  partition.reserve_removals(slots.size());  // then removing cannot fail halfway
  discard_samples(partition, slots);
  std::sort(released.begin(), released.end());
  return released;
}

void ControlData::discard_samples(PartitionState& partition, std::span<const uint32_t> slots) noexcept {
  for (uint32_t slot : slots) {
    indexes_.release(partition.global_index(slot));
    partition.remove_sample(slot);
  }
}

bool ControlData::restore_sample(PartitionState& partition, int64_t global_index, std::optional<uint64_t> generation,
                                 uint32_t put_id, uint32_t put_pos, uint32_t* slot) {
  if (global_index < 0 || indexes_.find(global_index)) return false;
  if (!generation) {
    generation = indexes_.next_generation();
    indexes_.set_next_generation(*generation + 1);
  }
  partition.note_put_id(put_id);
  *slot = partition.add_sample(global_index, put_id, put_pos, 0);  // the caller restores its versions
  return indexes_.claim(global_index, Location{partition.number(), *slot}, *generation);
}

}  // namespace seqflow::core
