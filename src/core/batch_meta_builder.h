// BatchMeta for samples of one partition: their indexes, the schema of the
// requested fields, production bits and custom_meta. Collected under the
// controller's lock with custom_meta still encoded; decoded after the lock
// is released, so that decoding never holds up other callers.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/partition_state.h"
#include "seqflow/controller.h"

namespace seqflow::core {

struct EncodedBatch {
  BatchMeta meta;                        // custom_meta left empty
  std::vector<std::string> custom_meta;  // encoded, one per sample
};

// Fields the partition does not know are left out of field_schema.
EncodedBatch collect_batch(const PartitionState& partition, std::span<const uint32_t> slots,
                           std::span<const std::string> fields);
// Every field of the partition.
EncodedBatch collect_batch(const PartitionState& partition, std::span<const uint32_t> slots);

BatchMeta decode_batch(EncodedBatch batch);

}  // namespace seqflow::core
