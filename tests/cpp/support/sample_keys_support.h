// Storage calls of tests that are not about generations: every sample of
// partition "p", generation 1 (no test framework: the fuzz target uses it).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "seqflow/storage.h"

namespace seqflow::test {

inline constexpr const char* kTestPartition = "p";

// Owns what the SampleKeys it converts to points at; a temporary lives to
// the end of the call it is an argument of.
struct TestSamples {
  std::vector<int64_t> global_indexes;
  PartitionIdList partitions;
  std::vector<uint64_t> generations;
  operator SampleKeys() const { return {global_indexes, partitions, generations}; }  // NOLINT: implicit on purpose
};

// The global indexes begin .. end - 1.
inline std::vector<int64_t> index_range(int64_t begin, int64_t end) {
  std::vector<int64_t> out;
  for (int64_t gi = begin; gi < end; ++gi) out.push_back(gi);
  return out;
}

inline TestSamples samples_of(std::span<const int64_t> global_indexes, uint64_t generation = 1,
                              const std::string& partition = kTestPartition) {
  return {{global_indexes.begin(), global_indexes.end()},
          PartitionIdList(global_indexes.size(), partition),
          std::vector<uint64_t>(global_indexes.size(), generation)};
}

}  // namespace seqflow::test
