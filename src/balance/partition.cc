#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>

#include "balance/exact_search.h"
#include "balance/largest_differencing.h"
#include "balance/lpt.h"
#include "balance/refine.h"
#include "balance/value_order.h"
#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace seqflow::balance {

namespace {

// Small inputs also get a bounded exact search: a few milliseconds at most.
constexpr size_t kExactSearchMaxUnits = 64;
constexpr int64_t kExactSearchNodes = 1 << 17;

// Items merged by group: cardinality and balancing work on units.
struct Units {
  std::vector<int64_t> weights;       // workload per unit
  std::vector<int64_t> unit_of_item;  // empty when every item is its own unit
};

Units build_units(std::vector<int64_t> item_costs, std::span<const int64_t> groups) {
  Units units;
  if (groups.empty()) {
    units.weights = std::move(item_costs);
    return units;
  }
  // Units are numbered by first appearance, so the result does not depend on
  // the group ids' values, only on the order of items.
  std::unordered_map<int64_t, int64_t> unit_of_group;
  unit_of_group.reserve(groups.size());
  units.unit_of_item.resize(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    auto [it, inserted] = unit_of_group.try_emplace(groups[i], static_cast<int64_t>(units.weights.size()));
    if (inserted) units.weights.push_back(0);
    units.unit_of_item[i] = it->second;
    units.weights[it->second] += item_costs[i];
  }
  return units;
}

void validate(std::span<const int64_t> weights, int64_t k, const Options& options) {
  if (weights.empty()) throw_invalid("weights must not be empty");
  if (k <= 0) throw_invalid("k must be positive, got " + std::to_string(k));
  if (!options.groups.empty() && options.groups.size() != weights.size()) {
    throw_invalid("groups has " + std::to_string(options.groups.size()) + " entries but weights has " +
                  std::to_string(weights.size()) + "; give one group id per item");
  }
}

void validate_unit_count(int64_t units, int64_t k, const Options& options) {
  const char* what = options.groups.empty() ? "items" : "groups";
  if (k > units) {
    throw_invalid("k (" + std::to_string(k) + ") must not exceed the number of " + what + " (" + std::to_string(units) +
                  ")");
  }
  if (options.cardinality == Cardinality::kEqual && units % k != 0) {
    throw_invalid(std::string("cardinality='equal' needs the number of ") + what + " (" + std::to_string(units) +
                  ") to be a multiple of k (" + std::to_string(k) +
                  "); use cardinality='balanced' for counts that differ by at most one");
  }
}

std::vector<int64_t> assignment_of(const detail::DifferencingResult& result, size_t units) {
  std::vector<int64_t> assignment(units);
  for (size_t p = 0; p < result.parts.size(); ++p) {
    for (int64_t u : result.parts[p]) assignment[u] = static_cast<int64_t>(p);
  }
  return assignment;
}

std::vector<int64_t> loads_of(std::span<const int64_t> weights, std::span<const int64_t> assignment, int64_t k) {
  std::vector<int64_t> loads(static_cast<size_t>(k), 0);
  for (size_t u = 0; u < weights.size(); ++u) loads[assignment[u]] += weights[u];
  return loads;
}

// Lower heaviest part wins, then the lower spread; earlier candidates win ties.
bool better(std::span<const int64_t> a, std::span<const int64_t> b) {
  auto [a_min, a_max] = std::minmax_element(a.begin(), a.end());
  auto [b_min, b_max] = std::minmax_element(b.begin(), b.end());
  if (*a_max != *b_max) return *a_max < *b_max;
  return *a_max - *a_min < *b_max - *b_min;
}

int64_t lower_bound_of(std::span<const int64_t> weights, int64_t k, int64_t total) {
  const int64_t largest = *std::max_element(weights.begin(), weights.end());
  return std::max(total / k + (total % k != 0 ? 1 : 0), largest);
}

// What every algorithm needs: unit weights, sorted once.
struct Problem {
  std::span<const int64_t> weights;
  std::vector<int64_t> ascending;
  int64_t k;
  Cardinality cardinality;
};

std::vector<int64_t> differencing_assignment(const Problem& p, detail::DifferencingStart start) {
  return assignment_of(detail::largest_differencing(p.weights, p.ascending, p.k, start), p.weights.size());
}

std::vector<int64_t> kk_assignment(const Problem& p) {
  return differencing_assignment(p, p.cardinality == Cardinality::kFree ? detail::DifferencingStart::kOneItemPerState
                                                                        : detail::DifferencingStart::kSortedChunks);
}

// Candidates, each refined; the best wins. Chunked differencing (near-optimal
// when parts hold many items) and LPT are cheap. Free-start differencing costs
// up to O(n k log k), so it runs only while the cheap ones leave a gap to the
// lower bound; a plan at the bound cannot be beaten, by kk or anything else.
// Small inputs that still have a gap get a bounded branch and bound.
std::vector<int64_t> auto_assignment(const Problem& p, int64_t lower_bound) {
  std::vector<int64_t> best;
  std::vector<int64_t> best_loads;
  auto consider = [&](std::vector<int64_t> candidate) {
    detail::refine(p.weights, p.ascending, p.k, p.cardinality, candidate);
    auto loads = loads_of(p.weights, candidate, p.k);
    if (best.empty() || better(loads, best_loads)) {
      best = std::move(candidate);
      best_loads = std::move(loads);
    }
  };
  auto at_bound = [&] { return *std::max_element(best_loads.begin(), best_loads.end()) <= lower_bound; };
  consider(differencing_assignment(p, detail::DifferencingStart::kSortedChunks));
  if (!at_bound()) consider(detail::longest_first(p.weights, p.ascending, p.k, p.cardinality));
  if (!at_bound() && p.cardinality == Cardinality::kFree) consider(kk_assignment(p));
  if (!at_bound() && p.weights.size() <= kExactSearchMaxUnits) {
    const int64_t heaviest = *std::max_element(best_loads.begin(), best_loads.end());
    auto exact =
        detail::search_lighter(p.weights, p.ascending, p.k, p.cardinality, heaviest, lower_bound, kExactSearchNodes);
    if (exact) consider(std::move(*exact));
  }
  return best;
}

Partition describe(std::span<const int64_t> item_costs, const Units& units, std::vector<int64_t> unit_assignment,
                   int64_t k, int64_t total) {
  Partition out;
  out.parts.resize(static_cast<size_t>(k));
  out.sums.assign(static_cast<size_t>(k), 0);
  if (units.unit_of_item.empty()) {
    out.assignment = std::move(unit_assignment);
  } else {
    out.assignment.resize(item_costs.size());
    for (size_t i = 0; i < item_costs.size(); ++i) {
      out.assignment[i] = unit_assignment[units.unit_of_item[i]];
    }
  }
  for (size_t i = 0; i < item_costs.size(); ++i) {
    out.parts[out.assignment[i]].push_back(static_cast<int64_t>(i));
    out.sums[out.assignment[i]] += item_costs[i];
  }
  out.lower_bound = lower_bound_of(units.weights, k, total);
  auto [lo, hi] = std::minmax_element(out.sums.begin(), out.sums.end());
  const double mean = static_cast<double>(total) / static_cast<double>(k);
  out.spread = mean > 0 ? static_cast<double>(*hi - *lo) / mean : 0.0;
  out.max_over_mean = mean > 0 ? static_cast<double>(*hi) / mean : 1.0;
  out.gap = out.lower_bound > 0 ? static_cast<double>(*hi) / static_cast<double>(out.lower_bound) - 1.0 : 0.0;
  return out;
}

}  // namespace

int64_t Partition::heaviest() const { return *std::max_element(sums.begin(), sums.end()); }

Partition partition(std::span<const int64_t> weights, int64_t k, const Options& options) {
  validate(weights, k, options);
  std::vector<int64_t> item_costs = options.workload.costs(weights, "weights");
  const int64_t total = options.workload.total(item_costs, "weights");
  Units units = build_units(item_costs, options.groups);
  validate_unit_count(static_cast<int64_t>(units.weights.size()), k, options);

  Problem problem{units.weights, detail::order_by_value(units.weights, detail::Direction::kAscending), k,
                  options.cardinality};
  std::vector<int64_t> assignment;
  switch (options.algorithm) {
    case Algorithm::kKK:
      assignment = kk_assignment(problem);
      break;
    case Algorithm::kLPT:
      assignment = detail::longest_first(problem.weights, problem.ascending, k, options.cardinality);
      break;
    case Algorithm::kAuto:
      assignment = auto_assignment(problem, lower_bound_of(units.weights, k, total));
      break;
  }
  return describe(item_costs, units, std::move(assignment), k, total);
}

}  // namespace seqflow::balance
