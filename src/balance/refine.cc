#include "balance/refine.h"

#include <algorithm>
#include <numeric>

#include "balance/capacity.h"

namespace seqflow::balance::detail {

namespace {

// Orders units by (weight, index).
struct ByWeight {
  std::span<const int64_t> weights;
  bool operator()(int64_t a, int64_t b) const { return weights[a] != weights[b] ? weights[a] < weights[b] : a < b; }
};

struct Exchange {
  int64_t from_unit = -1;  // leaves the heavier part
  int64_t to_unit = -1;    // leaves the lighter part (-1: a move, not a swap)
  int64_t score = -1;      // |2d - D|; lower is better
};

class Refiner {
 public:
  Refiner(std::span<const int64_t> weights, std::span<const int64_t> ascending, int64_t k, Cardinality cardinality,
          std::vector<int64_t>& assignment)
      : weights_(weights),
        assignment_(assignment),
        members_(static_cast<size_t>(k)),
        loads_(static_cast<size_t>(k), 0),
        capacity_(cardinality, static_cast<int64_t>(weights.size()), k) {
    // Filling parts in ascending order leaves each part's members sorted.
    for (int64_t unit : ascending) {
      members_[assignment[unit]].push_back(unit);
      loads_[assignment[unit]] += weights[unit];
    }
  }

  void run() {
    const int64_t max_rounds = 64 * static_cast<int64_t>(loads_.size()) + 1024;
    int64_t rounds = 0;
    while (rounds++ < max_rounds && lower_heaviest()) {
    }
    while (rounds++ < max_rounds && raise_lightest()) {
    }
  }

 private:
  int64_t part_count() const { return static_cast<int64_t>(loads_.size()); }

  int64_t extreme_part(bool heaviest) const {
    int64_t best = 0;
    for (int64_t p = 1; p < part_count(); ++p) {
      if (heaviest ? loads_[p] > loads_[best] : loads_[p] < loads_[best]) best = p;
    }
    return best;
  }

  // Partners in the order to try them: the opposite extreme first, then by load.
  std::vector<int64_t> partners(bool lightest_first) const {
    std::vector<int64_t> order(loads_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      if (loads_[a] != loads_[b]) return lightest_first ? loads_[a] < loads_[b] : loads_[a] > loads_[b];
      return a < b;
    });
    return order;
  }

  bool lower_heaviest() {
    int64_t heavy = extreme_part(true);
    if (try_exchange(heavy, extreme_part(false))) return true;
    for (int64_t light : partners(true)) {
      if (loads_[light] >= loads_[heavy]) break;
      if (try_exchange(heavy, light)) return true;
    }
    return false;
  }

  bool raise_lightest() {
    int64_t light = extreme_part(false);
    if (try_exchange(extreme_part(true), light)) return true;
    for (int64_t heavy : partners(false)) {
      if (loads_[heavy] <= loads_[light]) break;
      if (try_exchange(heavy, light)) return true;
    }
    return false;
  }

  // Finds the move or swap from `heavy` to `light` whose transferred weight d
  // lies in (0, D) and is closest to D/2, and applies it.
  bool try_exchange(int64_t heavy, int64_t light) {
    const int64_t diff = loads_[heavy] - loads_[light];
    if (heavy == light || diff <= 1) return false;
    const auto& from = members_[heavy];
    const auto& to = members_[light];
    Exchange best;
    auto consider = [&](int64_t from_unit, int64_t to_unit, int64_t d) {
      if (d <= 0 || d >= diff) return;
      int64_t score = std::abs(2 * d - diff);
      if (best.score < 0 || score < best.score) best = {from_unit, to_unit, score};
    };
    if (capacity_.can_move(static_cast<int64_t>(from.size()), static_cast<int64_t>(to.size()))) {
      // The unit closest to D/2 is next to where 2w crosses D.
      auto it = std::partition_point(from.begin(), from.end(), [&](int64_t u) { return 2 * weights_[u] < diff; });
      if (it != from.end()) consider(*it, -1, weights_[*it]);
      if (it != from.begin()) consider(*std::prev(it), -1, weights_[*std::prev(it)]);
    }
    size_t j = 0;
    for (int64_t a : from) {
      // Swap partner b should weigh about w_a - D/2; that target grows with a.
      while (j < to.size() && 2 * weights_[to[j]] < 2 * weights_[a] - diff) ++j;
      if (j < to.size()) consider(a, to[j], weights_[a] - weights_[to[j]]);
      if (j > 0) consider(a, to[j - 1], weights_[a] - weights_[to[j - 1]]);
    }
    if (best.score < 0) return false;
    transfer(best.from_unit, heavy, light);
    if (best.to_unit >= 0) transfer(best.to_unit, light, heavy);
    return true;
  }

  void transfer(int64_t unit, int64_t from, int64_t to) {
    auto& source = members_[from];
    source.erase(std::lower_bound(source.begin(), source.end(), unit, ByWeight{weights_}));
    auto& target = members_[to];
    target.insert(std::lower_bound(target.begin(), target.end(), unit, ByWeight{weights_}), unit);
    loads_[from] -= weights_[unit];
    loads_[to] += weights_[unit];
    assignment_[unit] = to;
  }

  std::span<const int64_t> weights_;
  std::vector<int64_t>& assignment_;
  std::vector<std::vector<int64_t>> members_;  // units per part, by (weight, index)
  std::vector<int64_t> loads_;
  Capacity capacity_;
};

}  // namespace

void refine(std::span<const int64_t> weights, std::span<const int64_t> ascending, int64_t k, Cardinality cardinality,
            std::vector<int64_t>& assignment) {
  Refiner(weights, ascending, k, cardinality, assignment).run();
}

}  // namespace seqflow::balance::detail
