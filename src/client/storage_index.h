// The index of a remote checkpoint's storage files: JSON text naming how
// many units saved and each unit's fingerprint, in routing order
// ({"fingerprints":[...],"storage_units":N}, as every earlier build wrote
// it). Internal to the client.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace seqflow {

std::string storage_index_text(const std::vector<uint64_t>& fingerprints);

// The fingerprints of the index at `path`, which must have been saved from
// `units` units; empty for an index saved before fingerprints existed.
// Throws kNotFound when there is no index, kInvalidArgument naming the
// path and the problem when it is corrupt or of another cluster.
std::vector<uint64_t> read_storage_index(const std::string& path, size_t units);

}  // namespace seqflow
