// Checking and preparing custom_meta updates so that every error is raised
// before any sample changes.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "seqflow/value.h"

#include "core/custom_meta.h"
#include "core/partition_state.h"

namespace seqflow::core {

// One object per sample, each checked and encoded on its own; throws
// kInvalidArgument naming the position and global index of the first bad
// entry, or the count mismatch. Needs no lock: callers run it before locking.
std::vector<EncodedMeta> encode_updates(std::span<const int64_t> global_indexes, std::span<const Value> custom_meta);

// The new metadata of each touched slot: its current metadata updated key by
// key with custom_meta[i] (encoded as updates[i]). A sample without metadata
// takes its update as is; a sample listed twice gets both updates in order.
// Changes nothing.
std::vector<std::pair<uint32_t, EncodedMeta>> prepare_meta(const PartitionState& partition,
                                                           std::span<const uint32_t> slots,
                                                           std::span<const int64_t> global_indexes,
                                                           std::span<const Value> custom_meta,
                                                           std::vector<EncodedMeta> updates);

}  // namespace seqflow::core
