// What samplers may ask about the samples of one partition (SampleInfo),
// answered from the partition's columns; custom_meta is decoded on demand.
#pragma once

#include <unordered_map>

#include "seqflow/value.h"

#include "core/control_data.h"
#include "seqflow/sampler.h"

namespace seqflow::core {

class PartitionSampleInfo final : public SampleInfo {
 public:
  PartitionSampleInfo(const ControlData& data, const PartitionState& partition) : data_(data), partition_(partition) {}

  std::optional<int64_t> length(int64_t global_index) const override;
  std::string group_key(int64_t global_index, int64_t n) const override;
  const Value& custom_meta(int64_t global_index) const override;

 private:
  // Throws kInvalidArgument when the sampler asks about a foreign sample.
  uint32_t slot(int64_t global_index) const;

  const ControlData& data_;
  const PartitionState& partition_;
  mutable std::unordered_map<int64_t, Value> decoded_;
};

}  // namespace seqflow::core
