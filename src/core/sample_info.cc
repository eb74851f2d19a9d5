#include "core/sample_info.h"

#include "seqflow/error.h"

namespace seqflow::core {

uint32_t PartitionSampleInfo::slot(int64_t global_index) const {
  auto slot = data_.slot_of(partition_, global_index);
  if (!slot) {
    throw_invalid("global index " + std::to_string(global_index) + " is not a live sample of partition '" +
                  partition_.name() + "'");
  }
  return *slot;
}

std::optional<int64_t> PartitionSampleInfo::length(int64_t global_index) const {
  return partition_.length(slot(global_index));
}

std::string PartitionSampleInfo::group_key(int64_t global_index, int64_t n) const {
  return partition_.group_key(slot(global_index), n);
}

const Value& PartitionSampleInfo::custom_meta(int64_t global_index) const {
  auto it = decoded_.find(global_index);
  if (it == decoded_.end()) {
    it = decoded_.emplace(global_index, decode_meta(partition_.meta_bytes(slot(global_index)))).first;
  }
  return it->second;
}

}  // namespace seqflow::core
