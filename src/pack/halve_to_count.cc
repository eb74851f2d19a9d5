// detail::halve_to_count: the costliest part halved, balanced, until enough.
#include "pack/halve_to_count.h"

#include <algorithm>
#include <optional>
#include <string>

#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace seqflow::pack::detail {

std::vector<std::vector<int64_t>> halve_to_count(std::vector<std::vector<int64_t>> parts, int64_t count,
                                                 std::span<const int64_t> costs) {
  std::erase_if(parts, [](const auto& part) { return part.empty(); });
  std::vector<int64_t> sums;
  for (const auto& part : parts) {
    int64_t sum = 0;
    for (int64_t item : part) sum += costs[static_cast<size_t>(item)];
    sums.push_back(sum);
  }
  while (static_cast<int64_t>(parts.size()) < count) {
    std::optional<size_t> widest;
    for (size_t p = 0; p < parts.size(); ++p) {
      if (parts[p].size() > 1 && (!widest || sums[p] > sums[*widest])) widest = p;
    }
    if (!widest) {
      throw_invalid("count (" + std::to_string(count) + ") exceeds the items of the plan: no part left to halve");
    }
    const std::vector<int64_t> items = std::move(parts[*widest]);
    std::vector<int64_t> item_costs;
    for (int64_t item : items) item_costs.push_back(costs[static_cast<size_t>(item)]);
    std::vector<std::vector<int64_t>> halves;
    std::vector<int64_t> half_sums;
    for (const auto& half : balance::get_seqlen_balanced_partitions(item_costs, 2, false)) {
      auto& out = halves.emplace_back();
      int64_t sum = 0;
      for (int64_t i : half) {
        out.push_back(items[static_cast<size_t>(i)]);
        sum += item_costs[static_cast<size_t>(i)];
      }
      half_sums.push_back(sum);
    }
    parts[*widest] = std::move(halves[0]);
    sums[*widest] = half_sums[0];
    parts.insert(parts.begin() + static_cast<std::ptrdiff_t>(*widest) + 1, std::move(halves[1]));
    sums.insert(sums.begin() + static_cast<std::ptrdiff_t>(*widest) + 1, half_sums[1]);
  }
  return parts;
}

}  // namespace seqflow::pack::detail
