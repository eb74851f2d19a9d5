#include "pack/bin_packing.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <set>
#include <tuple>

#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace seqflow::pack::detail {

namespace {

constexpr int64_t kMaxBinsForFullSearch = 64;
constexpr balance::Algorithm kAllTries[] = {balance::Algorithm::kLPT, balance::Algorithm::kAuto};

// A split under construction: which bin each item is in, and each bin's
// tokens and workload.
struct BinLoads {
  std::vector<int64_t> assignment;
  std::vector<int64_t> tokens;
  std::vector<int64_t> costs;

  BinLoads(std::span<const int64_t> item_tokens, std::span<const int64_t> item_costs, std::vector<int64_t> assign,
           int64_t k)
      : assignment(std::move(assign)), tokens(static_cast<size_t>(k), 0), costs(static_cast<size_t>(k), 0) {
    for (size_t i = 0; i < assignment.size(); ++i) {
      tokens[assignment[i]] += item_tokens[i];
      costs[assignment[i]] += item_costs[i];
    }
  }

  bool within(int64_t cap) const {
    return std::all_of(tokens.begin(), tokens.end(), [cap](int64_t t) { return t <= cap; });
  }
};

// Evens out bin workloads by moving one item, or swapping two, between the
// heaviest and the lightest bin, only where both bins stay under the cap.
// Never makes the heaviest bin heavier. Per round it looks at the exchanges
// whose transferred workload is nearest half the difference: O(bin size).
void refine_under_cap(std::span<const int64_t> item_tokens, std::span<const int64_t> item_costs, int64_t cap,
                      BinLoads& bins) {
  const auto k = static_cast<int64_t>(bins.costs.size());
  auto by_cost = [&](int64_t a, int64_t b) {
    return item_costs[a] != item_costs[b] ? item_costs[a] < item_costs[b] : a < b;
  };
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(k));  // by (cost, index)
  for (size_t i = 0; i < bins.assignment.size(); ++i) {
    members[bins.assignment[i]].push_back(static_cast<int64_t>(i));
  }
  for (auto& bin : members) std::sort(bin.begin(), bin.end(), by_cost);
  // Each round scans the k bins: bounded so that many bins stay cheap.
  const int64_t max_rounds = std::min<int64_t>(4 * static_cast<int64_t>(item_tokens.size()), 8 * k) + 64;
  for (int64_t round = 0; round < max_rounds; ++round) {
    auto [lo, hi] = std::minmax_element(bins.costs.begin(), bins.costs.end());
    const int64_t light = lo - bins.costs.begin();
    const int64_t heavy = hi - bins.costs.begin();
    const int64_t diff = *hi - *lo;
    if (diff <= 1) return;
    // Best exchange: transferred workload d in (0, diff), closest to diff / 2.
    int64_t best_score = -1;
    int64_t best_from = -1;
    int64_t best_to = -1;  // -1 for a move
    auto consider = [&](int64_t x, int64_t y) {
      const int64_t d = item_costs[x] - (y >= 0 ? item_costs[y] : 0);
      const int64_t moved = item_tokens[x] - (y >= 0 ? item_tokens[y] : 0);
      if (d <= 0 || d >= diff) return;
      if (bins.tokens[light] + moved > cap || bins.tokens[heavy] - moved > cap) return;
      const int64_t score = std::abs(2 * d - diff);
      if (best_score < 0 || score < best_score) {
        best_score = score;
        best_from = x;
        best_to = y;
      }
    };
    const auto& from = members[heavy];
    const auto& to = members[light];
    // A move: the item nearest diff / 2 is next to where 2 * cost crosses diff.
    auto it = std::partition_point(from.begin(), from.end(), [&](int64_t x) { return 2 * item_costs[x] < diff; });
    if (it != from.end()) consider(*it, -1);
    if (it != from.begin()) consider(*std::prev(it), -1);
    // A swap: x's partner should cost about cost(x) - diff / 2, which grows with x.
    size_t j = 0;
    for (int64_t x : from) {
      while (j < to.size() && 2 * item_costs[to[j]] < 2 * item_costs[x] - diff) ++j;
      if (j < to.size()) consider(x, to[j]);
      if (j > 0) consider(x, to[j - 1]);
    }
    if (best_score < 0) return;
    auto transfer = [&](int64_t item, int64_t source, int64_t target) {
      auto& out = members[source];
      out.erase(std::lower_bound(out.begin(), out.end(), item, by_cost));
      auto& in = members[target];
      in.insert(std::lower_bound(in.begin(), in.end(), item, by_cost), item);
      bins.assignment[item] = target;
      bins.tokens[source] -= item_tokens[item];
      bins.tokens[target] += item_tokens[item];
      bins.costs[source] -= item_costs[item];
      bins.costs[target] += item_costs[item];
    };
    transfer(best_from, heavy, light);
    if (best_to >= 0) transfer(best_to, light, heavy);
  }
}

}  // namespace

std::optional<Bins> best_fit_decreasing(std::span<const int64_t> tokens, int64_t cap, int64_t max_bins) {
  std::vector<int64_t> order(tokens.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return tokens[a] > tokens[b]; });
  // Open bins by (room left, bin): the fullest bin that still fits comes first.
  std::set<std::pair<int64_t, int64_t>> room;
  Bins out;
  out.assignment.assign(tokens.size(), -1);
  for (int64_t item : order) {
    auto it = room.lower_bound({tokens[item], -1});
    int64_t bin = 0;
    int64_t left = 0;
    if (it == room.end()) {
      if (out.count == max_bins) return std::nullopt;
      bin = out.count++;
      left = cap;
    } else {
      std::tie(left, bin) = *it;
      room.erase(it);
    }
    out.assignment[item] = bin;
    room.insert({left - tokens[item], bin});
  }
  out.count = std::max<int64_t>(out.count, 1);
  return out;
}

namespace {

std::vector<int64_t> balanced_split(std::span<const int64_t> tokens, int64_t k, const Workload& workload,
                                    balance::Algorithm algorithm) {
  balance::Options options;
  options.cardinality = balance::Cardinality::kFree;
  options.workload = workload;
  options.algorithm = algorithm;
  return balance::partition(tokens, k, options).assignment;
}

}  // namespace

std::optional<std::vector<int64_t>> fit_into_bins(std::span<const int64_t> tokens, int64_t k, int64_t cap,
                                                  const Workload& workload) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n <= k) {
    std::vector<int64_t> own(static_cast<size_t>(n));
    std::iota(own.begin(), own.end(), 0);
    return own;
  }
  const int64_t total = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
  if (ceil_div(total, cap) > k) return std::nullopt;

  // The engine minimises the heaviest bin; for token workloads that is
  // exactly what the cap needs. Longest-first, evened out under the cap, is
  // the cheap first try (a plan packs thousands of (rank, step) pairs); the
  // engine's full search comes next, then both on tokens, then the tight
  // packer. The full search costs up to O(n k log k): with many bins, where
  // it finds little that longest-first and best-fit miss, it is skipped.
  std::vector<int64_t> costs = workload.costs(tokens, "lengths");
  const std::span<const balance::Algorithm> tries = k <= kMaxBinsForFullSearch
                                                        ? std::span<const balance::Algorithm>(kAllTries)
                                                        : std::span<const balance::Algorithm>(kAllTries).first(1);
  for (const Workload& by : {workload, Workload::tokens()}) {
    for (balance::Algorithm algorithm : tries) {
      BinLoads bins(tokens, costs, balanced_split(tokens, k, by, algorithm), k);
      if (bins.within(cap)) {
        refine_under_cap(tokens, costs, cap, bins);
        return std::move(bins.assignment);
      }
    }
    if (workload.is_tokens()) break;
  }
  auto packed = best_fit_decreasing(tokens, cap, k);
  if (!packed) return std::nullopt;
  BinLoads tight(tokens, costs, std::move(packed->assignment), k);
  refine_under_cap(tokens, costs, cap, tight);
  return std::move(tight.assignment);
}

Bins fewest_bins(std::span<const int64_t> tokens, int64_t cap, const Workload& workload, int64_t at_least) {
  std::vector<std::vector<int64_t>> one{std::vector<int64_t>(tokens.begin(), tokens.end())};
  const int64_t total = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
  Bins out;
  out.count = std::max({at_least, ceil_div(total, cap), int64_t{1}});
  out.assignment = std::move(fit_all_into_bins(one, out.count, 1, cap, workload)[0]);
  return out;
}

std::vector<std::vector<int64_t>> fit_all_into_bins(const std::vector<std::vector<int64_t>>& tokens, int64_t& bins,
                                                    int64_t increment, int64_t cap, const Workload& workload) {
  std::vector<std::vector<int64_t>> assignments(tokens.size());
  auto fits = [&](int64_t count) {
    std::vector<std::vector<int64_t>> found(tokens.size());
    for (size_t list = 0; list < tokens.size(); ++list) {
      auto assignment = fit_into_bins(tokens[list], count, cap, workload);
      if (!assignment) return false;
      found[list] = std::move(*assignment);
    }
    assignments = std::move(found);
    return true;
  };
  if (fits(bins)) return assignments;
  // Best-fit decreasing succeeds with as many bins as it opens on its own, and
  // with any more, and fit_into_bins falls back to it: candidates up to that
  // count always fit. Binary search for the fewest that fit_into_bins manages.
  int64_t most = bins;
  for (const auto& list : tokens) most = std::max(most, best_fit_decreasing(list, cap, INT64_MAX)->count);
  // Candidates are bins + j * increment; j = hi is known to fit.
  int64_t lo = 1;
  int64_t hi = std::max<int64_t>(1, ceil_div(most - bins, increment));
  std::optional<std::vector<std::vector<int64_t>>> at_hi;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (fits(bins + mid * increment)) {
      hi = mid;
      at_hi = std::move(assignments);
    } else {
      lo = mid + 1;
    }
  }
  bins += hi * increment;
  if (at_hi) return std::move(*at_hi);
  if (!fits(bins)) throw Error(ErrorCode::kInternal, "pack: best-fit decreasing failed at its own bin count");
  return assignments;
}

}  // namespace seqflow::pack::detail
