// The one error for a BatchMeta that names a sample that is gone, or whose
// global index now holds another sample (ErrorCode::kStaleSample; Python's
// seqflow.StaleSampleError, a KeyError). The controller and the storage
// raise it with the same words: the partition, the global index, the
// BatchMeta's generation (0: not known, a BatchMeta built by hand) and what
// holds the index now.
#pragma once

#include <cstdint>
#include <string>

namespace seqflow {

// The sample was cleared and its index is free (or held elsewhere).
[[noreturn]] void throw_sample_gone(const std::string& partition, int64_t global_index, uint64_t meta_generation);
// Storage holds nothing under the index (asked for `field`): the sample was
// cleared (or nothing was put to it yet).
[[noreturn]] void throw_sample_without_data(const std::string& partition, int64_t global_index,
                                            uint64_t meta_generation, const std::string& field);
// The index was handed out again: another sample of the partition holds it.
[[noreturn]] void throw_sample_reused(const std::string& partition, int64_t global_index, uint64_t meta_generation,
                                      uint64_t current_generation);
// The index holds a sample of another partition (stale, or partition_ids edited).
[[noreturn]] void throw_sample_foreign(const std::string& partition, int64_t global_index, uint64_t meta_generation,
                                       const std::string& owner);

}  // namespace seqflow
