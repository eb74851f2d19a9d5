#include "balance/lpt.h"

#include <queue>
#include <utility>

#include "balance/capacity.h"

namespace seqflow::balance::detail {

std::vector<int64_t> longest_first(std::span<const int64_t> weights, std::span<const int64_t> ascending, int64_t k,
                                   Cardinality cardinality) {
  const auto n = static_cast<int64_t>(weights.size());

  using Entry = std::pair<int64_t, int64_t>;  // (load, part)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> lightest;
  for (int64_t part = 0; part < k; ++part) lightest.push({0, part});
  std::vector<int64_t> counts(static_cast<size_t>(k), 0);
  std::vector<int64_t> assignment(weights.size(), -1);
  Capacity capacity(cardinality, n, k);
  for (auto it = ascending.rbegin(); it != ascending.rend(); ++it) {
    const int64_t unit = *it;
    // Parts that filled up are dropped lazily when they surface.
    while (!capacity.can_add(counts[lightest.top().second])) lightest.pop();
    auto [load, part] = lightest.top();
    lightest.pop();
    assignment[unit] = part;
    capacity.added(++counts[part]);
    lightest.push({load + weights[unit], part});
  }
  return assignment;
}

}  // namespace seqflow::balance::detail
