#include "transport/storage_routing.h"

#include <string>

#include "seqflow/error.h"

namespace seqflow::transport {

std::vector<Shard> shard_indexes(std::span<const int64_t> global_indexes, size_t units) {
  if (units == 0) throw_invalid("no storage unit is registered with the controller");
  std::vector<Shard> shards(units);
  for (size_t i = 0; i < global_indexes.size(); ++i) {
    const int64_t gi = global_indexes[i];
    if (gi < 0) throw_invalid("global_indexes[" + std::to_string(i) + "] is negative: " + std::to_string(gi));
    Shard& shard = shards[unit_of(gi, units)];
    shard.positions.push_back(i);
    shard.global_indexes.push_back(gi);
  }
  return shards;
}

std::vector<std::pair<size_t, size_t>> consecutive_runs(std::span<const size_t> positions) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t begin = 0, end = 1; begin < positions.size(); begin = end++) {
    while (end < positions.size() && positions[end] == positions[end - 1] + 1) ++end;
    runs.emplace_back(begin, end);
  }
  return runs;
}

}  // namespace seqflow::transport
