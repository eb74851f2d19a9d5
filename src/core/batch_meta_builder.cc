#include "core/batch_meta_builder.h"

namespace seqflow::core {
namespace {

// `meta` arrives with its field_schema filled in; the rest follows the slots.
BatchMeta collect(const ControlData& data, const PartitionState& partition, std::span<const uint32_t> slots,
                  BatchMeta meta) {
  meta.global_indexes.reserve(slots.size());
  meta.generations.reserve(slots.size());
  meta.partition_ids.append(slots.size(), partition.name());
  // Field ids in field_schema's order (by name), the order of each status row.
  std::vector<uint32_t> ids;
  ids.reserve(meta.field_schema.size());
  for (const auto& entry : meta.field_schema) ids.push_back(*partition.field_id(entry.first));
  meta.production_status.resize(slots.size() * ids.size());
  size_t meta_bytes = 0;
  for (uint32_t slot : slots) meta_bytes += partition.meta_bytes(slot).size();
  meta.custom_meta.reserve(slots.size(), meta_bytes);
  uint8_t* status = meta.production_status.data();
  for (uint32_t slot : slots) {
    meta.global_indexes.push_back(partition.global_index(slot));
    meta.generations.push_back(data.generation(meta.global_indexes.back()));
    for (uint32_t id : ids) *status++ = partition.produced(slot, id) ? 1 : 0;
    meta.custom_meta.push_back_encoded(partition.meta_bytes(slot));
  }
  auto id = ids.begin();
  for (const auto& entry : meta.field_schema) {
    const uint32_t field = *id++;
    if (!partition.field_has_versions(field)) continue;
    std::vector<uint64_t> versions;
    versions.reserve(slots.size());
    bool overwritten = false;
    for (uint32_t slot : slots) {
      versions.push_back(partition.field_version(slot, field));
      overwritten = overwritten || versions.back() != 0;
    }
    if (overwritten) meta.versions.emplace(entry.first, std::move(versions));
  }
  return meta;
}

}  // namespace

BatchMeta collect_batch(const ControlData& data, const PartitionState& partition, std::span<const uint32_t> slots,
                        std::span<const std::string> fields) {
  BatchMeta meta;
  for (const std::string& name : fields) {
    if (auto id = partition.field_id(name)) meta.field_schema.emplace(name, partition.schema(*id));
  }
  return collect(data, partition, slots, std::move(meta));
}

BatchMeta collect_batch(const ControlData& data, const PartitionState& partition, std::span<const uint32_t> slots) {
  BatchMeta meta;
  for (uint32_t id = 0; id < partition.field_count(); ++id) {
    meta.field_schema.emplace(partition.field_name(id), partition.schema(id));
  }
  return collect(data, partition, slots, std::move(meta));
}

}  // namespace seqflow::core
