// Orders of planned outputs: the micro-batch order of samples and the way
// back to the original order.
#include <algorithm>
#include <numeric>
#include <string>

#include "pack/limits.h"
#include "seqflow/error.h"
#include "seqflow/pack.h"

namespace seqflow::pack {

std::vector<int64_t> micro_batch_order(const MicroBatchPlan& plan, std::optional<int64_t> rank) {
  const auto ranks = static_cast<int64_t>(plan.batches.size());
  if (rank) detail::require_index("rank", *rank, ranks);
  const int64_t first = rank.value_or(0);
  const int64_t last = rank ? *rank + 1 : ranks;
  std::vector<int64_t> out;
  for (int64_t r = first; r < last; ++r) {
    for (const auto& batch : plan.batches[static_cast<size_t>(r)]) out.insert(out.end(), batch.begin(), batch.end());
  }
  return out;
}

std::vector<int64_t> restore_order(std::span<const int64_t> order) {
  std::vector<int64_t> positions(order.size());
  std::iota(positions.begin(), positions.end(), 0);
  std::stable_sort(positions.begin(), positions.end(),
                   [&](int64_t a, int64_t b) { return order[static_cast<size_t>(a)] < order[static_cast<size_t>(b)]; });
  return positions;
}

std::vector<int64_t> inverse_permutation(std::span<const int64_t> order) {
  const auto n = static_cast<int64_t>(order.size());
  std::vector<int64_t> inverse(order.size(), -1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t value = order[i];
    if (value < 0 || value >= n || inverse[value] != -1) {
      throw_invalid("order is not a permutation of 0.." + std::to_string(n - 1) + ": order[" + std::to_string(i) +
                    "] = " + std::to_string(value) + (value >= 0 && value < n ? " appears twice" : " is out of range"));
    }
    inverse[value] = i;
  }
  return inverse;
}

}  // namespace seqflow::pack
