// k-way largest differencing (Karmarkar-Karp), internal to the balance layer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace seqflow::balance::detail {

enum class DifferencingStart {
  kOneItemPerState,  // free cardinality
  kSortedChunks,     // chunks of k consecutive sorted items: equal (or, with a
                     // short first chunk, balanced) cardinality
};

struct DifferencingResult {
  // Parts in the final state's order (heaviest first); items in merge order.
  std::vector<std::vector<int64_t>> parts;
  std::vector<int64_t> sums;
};

// Values may be negative (verl accepts them); the caller guarantees that the
// sum of absolute values fits in int64. Ties are resolved exactly as verl's
// heapq-based implementation resolves them, so results are bit-identical.
// `ascending` is order_by_value(values, kAscending).
DifferencingResult largest_differencing(std::span<const int64_t> values, std::span<const int64_t> ascending, int64_t k,
                                        DifferencingStart start);

}  // namespace seqflow::balance::detail
