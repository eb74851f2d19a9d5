#include "balance/exact_search.h"

#include <algorithm>

namespace seqflow::balance::detail {

namespace {

class BranchAndBound {
 public:
  BranchAndBound(std::span<const int64_t> weights, std::span<const int64_t> ascending, int64_t k,
                 Cardinality cardinality, int64_t node_budget)
      : weights_(weights),
        order_(ascending.rbegin(), ascending.rend()),
        loads_(static_cast<size_t>(k), 0),
        counts_(static_cast<size_t>(k), 0),
        assignment_(weights.size(), -1),
        suffix_(weights.size() + 1, 0),
        free_(cardinality == Cardinality::kFree),
        floor_(static_cast<int64_t>(weights.size()) / k),
        extra_(free_ ? 0 : static_cast<int64_t>(weights.size()) % k),
        budget_(node_budget) {
    for (size_t i = order_.size(); i-- > 0;) suffix_[i] = suffix_[i + 1] + weights[order_[i]];
  }

  // True when every part can stay at or below `limit`; the assignment is kept.
  bool fits_under(int64_t limit) {
    limit_ = limit;
    return place(0, static_cast<int64_t>(loads_.size()) * limit);
  }
  bool exhausted() const { return nodes_ > budget_; }
  const std::vector<int64_t>& assignment() const { return assignment_; }

 private:
  bool can_add(int64_t count) const { return free_ || count < floor_ || (count == floor_ && extra_used_ < extra_); }

  bool place(size_t pos, int64_t slack) {
    if (pos == order_.size()) return true;
    if (++nodes_ > budget_ || slack < suffix_[pos]) return false;
    const int64_t unit = order_[pos];
    const int64_t w = weights_[unit];
    for (size_t p = 0; p < loads_.size(); ++p) {
      if (loads_[p] + w > limit_ || !can_add(counts_[p])) continue;
      // Parts with the same load and count are interchangeable: try one.
      bool seen = false;
      for (size_t q = 0; q < p && !seen; ++q) seen = loads_[q] == loads_[p] && counts_[q] == counts_[p];
      if (seen) continue;
      const bool uses_extra = !free_ && counts_[p] == floor_;
      loads_[p] += w;
      ++counts_[p];
      extra_used_ += uses_extra;
      assignment_[unit] = static_cast<int64_t>(p);
      if (place(pos + 1, slack - w)) return true;
      loads_[p] -= w;
      --counts_[p];
      extra_used_ -= uses_extra;
      if (exhausted()) return false;
    }
    return false;
  }

  std::span<const int64_t> weights_;
  std::vector<int64_t> order_;  // heaviest first
  std::vector<int64_t> loads_;
  std::vector<int64_t> counts_;
  std::vector<int64_t> assignment_;
  std::vector<int64_t> suffix_;  // weight of order_[i..]
  bool free_;
  int64_t floor_;
  int64_t extra_;
  int64_t extra_used_ = 0;
  int64_t limit_ = 0;
  int64_t nodes_ = 0;
  int64_t budget_;
};

}  // namespace

std::optional<std::vector<int64_t>> search_lighter(std::span<const int64_t> weights, std::span<const int64_t> ascending,
                                                   int64_t k, Cardinality cardinality, int64_t incumbent_max,
                                                   int64_t lower_bound, int64_t node_budget) {
  std::optional<std::vector<int64_t>> best;
  BranchAndBound search(weights, ascending, k, cardinality, node_budget);
  for (int64_t limit = incumbent_max - 1; limit >= lower_bound && search.fits_under(limit);) {
    best = search.assignment();
    int64_t reached = 0;
    std::vector<int64_t> loads(static_cast<size_t>(k), 0);
    for (size_t u = 0; u < weights.size(); ++u) reached = std::max(reached, loads[(*best)[u]] += weights[u]);
    limit = reached - 1;
    search = BranchAndBound(weights, ascending, k, cardinality, node_budget);
  }
  return best;
}

}  // namespace seqflow::balance::detail
