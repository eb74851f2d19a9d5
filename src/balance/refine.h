// Local search that evens out an existing assignment.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "seqflow/balance.h"

namespace seqflow::balance::detail {

// Repeatedly moves one unit, or swaps two, between a heavy and a light part
// while that lowers the heaviest part (then raises the lightest) and keeps the
// cardinality rule. Never makes the heaviest part heavier.
// `ascending` is order_by_value(weights, kAscending).
void refine(std::span<const int64_t> weights, std::span<const int64_t> ascending, int64_t k, Cardinality cardinality,
            std::vector<int64_t>& assignment);

}  // namespace seqflow::balance::detail
