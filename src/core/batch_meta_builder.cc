#include "core/batch_meta_builder.h"

#include <map>

namespace seqflow::core {
namespace {

EncodedBatch collect(const PartitionState& partition, std::span<const uint32_t> slots,
                     const std::map<std::string, uint32_t>& field_ids) {
  EncodedBatch batch;
  BatchMeta& meta = batch.meta;
  meta.global_indexes.reserve(slots.size());
  meta.partition_ids.assign(slots.size(), partition.name());
  meta.production_status.reserve(slots.size());
  batch.custom_meta.reserve(slots.size());
  for (const auto& [name, id] : field_ids) meta.field_schema.emplace(name, partition.schema(id));
  for (uint32_t slot : slots) {
    meta.global_indexes.push_back(partition.global_index(slot));
    // Same order as field_schema (a std::map: by name).
    std::vector<bool> produced;
    produced.reserve(field_ids.size());
    for (const auto& entry : field_ids) produced.push_back(partition.produced(slot, entry.second));
    meta.production_status.push_back(std::move(produced));
    batch.custom_meta.push_back(partition.meta_bytes(slot));
  }
  return batch;
}

}  // namespace

EncodedBatch collect_batch(const PartitionState& partition, std::span<const uint32_t> slots,
                           std::span<const std::string> fields) {
  std::map<std::string, uint32_t> field_ids;
  for (const std::string& name : fields) {
    if (auto id = partition.field_id(name)) field_ids.emplace(name, *id);
  }
  return collect(partition, slots, field_ids);
}

EncodedBatch collect_batch(const PartitionState& partition, std::span<const uint32_t> slots) {
  std::map<std::string, uint32_t> field_ids;
  for (uint32_t id = 0; id < partition.field_count(); ++id) {
    field_ids.emplace(partition.field_name(id), id);
  }
  return collect(partition, slots, field_ids);
}

BatchMeta decode_batch(EncodedBatch batch) {
  batch.meta.custom_meta.reserve(batch.custom_meta.size());
  for (const std::string& bytes : batch.custom_meta) {
    batch.meta.custom_meta.push_back(decode_meta(bytes));
  }
  return std::move(batch.meta);
}

}  // namespace seqflow::core
