// BatchMeta for samples of one partition: their indexes and generations, the schema of the
// requested fields, production bits and custom_meta (copied as encoded bytes;
// callers decode only what they read). Built under the controller's lock.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/control_data.h"
#include "core/partition_state.h"
#include "seqflow/controller.h"

namespace seqflow::core {

// Fields the partition does not know are left out of field_schema.
BatchMeta collect_batch(const ControlData& data, const PartitionState& partition, std::span<const uint32_t> slots,
                        std::span<const std::string> fields);
// Every field of the partition.
BatchMeta collect_batch(const ControlData& data, const PartitionState& partition, std::span<const uint32_t> slots);

}  // namespace seqflow::core
