// Where a sample lives in remote mode: the one routing rule. Global indexes
// are placed in blocks of kPlacementBlock (seqflow/limits.h) consecutive
// ones, block b on unit b % N. A put's samples on one unit then lie in runs
// of consecutive positions, each sent as frames of its own instead of
// packed into one (a copy), and the units hold a job's samples evenly to
// within a block (the smallest free index is reused first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "seqflow/limits.h"

namespace seqflow::transport {

using seqflow::kPlacementBlock;

// The unit of `global_index` (not negative) among `units` (at least one).
inline size_t unit_of(int64_t global_index, size_t units) {
  return static_cast<size_t>(global_index) / kPlacementBlock % units;
}

struct Shard {
  std::vector<size_t> positions;        // into the routed index list, ascending
  std::vector<int64_t> global_indexes;  // the indexes at those positions
};

// One shard per unit; throws kInvalidArgument on a negative index or no unit.
std::vector<Shard> shard_indexes(std::span<const int64_t> global_indexes, size_t units);

// The runs of consecutive positions (p, p + 1, ...) in ascending `positions`,
// as [begin, end) ranges into `positions`.
std::vector<std::pair<size_t, size_t>> consecutive_runs(std::span<const size_t> positions);

// Where unit `unit` keeps its part of the storage checkpoint at `path`.
inline std::string storage_unit_file(const std::string& path, size_t unit) {
  return path + ".unit" + std::to_string(unit);
}

}  // namespace seqflow::transport
