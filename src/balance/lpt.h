// Longest processing time first, with a cardinality cap.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "seqflow/balance.h"

namespace seqflow::balance::detail {

// Returns the part of each unit. Units go heaviest first (ties: higher index)
// to the lightest part (ties: lower part) that still has room. `ascending` is
// order_by_value(weights, kAscending).
std::vector<int64_t> longest_first(std::span<const int64_t> weights, std::span<const int64_t> ascending, int64_t k,
                                   Cardinality cardinality);

}  // namespace seqflow::balance::detail
