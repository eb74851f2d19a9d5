// Branch and bound for small inputs, where local search can miss exchanges
// that move several items at once.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "seqflow/balance.h"

namespace seqflow::balance::detail {

// Looks for an assignment whose heaviest part is lighter than `incumbent_max`,
// tightening until none exists, the lower bound is met, or `node_budget`
// search nodes are spent. Returns the best assignment found, if any beats
// the incumbent. `ascending` is order_by_value(weights, kAscending).
std::optional<std::vector<int64_t>> search_lighter(std::span<const int64_t> weights, std::span<const int64_t> ascending,
                                                   int64_t k, Cardinality cardinality, int64_t incumbent_max,
                                                   int64_t lower_bound, int64_t node_budget);

}  // namespace seqflow::balance::detail
