// Sample gi lives on storage unit gi % N: the one routing rule of remote mode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace seqflow::transport {

struct Shard {
  std::vector<size_t> positions;        // into the routed index list, ascending
  std::vector<int64_t> global_indexes;  // the indexes at those positions
};

// One shard per unit; throws kInvalidArgument on a negative index or no unit.
std::vector<Shard> shard_indexes(std::span<const int64_t> global_indexes, size_t units);

// Where unit `unit` keeps its part of the storage checkpoint at `path`.
inline std::string storage_unit_file(const std::string& path, size_t unit) {
  return path + ".unit" + std::to_string(unit);
}

}  // namespace seqflow::transport
