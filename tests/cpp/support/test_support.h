// Shared helpers of the balancing-engine tests: independent recomputation of
// what a Partition must satisfy, random inputs and brute force (and, through
// error_matchers.h, the error matchers).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "seqflow/balance.h"
#include "error_matchers.h"
#include "seqflow/error.h"
#include "seqflow/workload.h"

namespace seqflow::test {

using Weights = std::vector<int64_t>;
using Rng = std::mt19937_64;

// Fixed seed of every random test: failures reproduce exactly.
inline constexpr uint64_t kSeed = 0x5eedf10eULL;

// cost = a * L + b * L * L in 128 bits; nullopt when it does not fit in int64.
inline std::optional<int64_t> model_cost(int64_t a, int64_t b, int64_t length) {
  const __int128 cost = static_cast<__int128>(a) * length + static_cast<__int128>(b) * length * length;
  if (cost > INT64_MAX) return std::nullopt;
  return static_cast<int64_t>(cost);
}

// Item costs recomputed from the workload's coefficients, not through Workload::cost.
inline Weights model_costs(const Weights& lengths, const Workload& workload) {
  Weights out;
  out.reserve(lengths.size());
  for (int64_t length : lengths) {
    auto cost = model_cost(workload.linear(), workload.quadratic_term(), length);
    if (!cost) ADD_FAILURE() << "test input overflows: length " << length;
    out.push_back(cost.value_or(0));
  }
  return out;
}

// Unit (group) of each item, numbered by first appearance, and unit costs.
struct UnitView {
  std::vector<size_t> unit_of_item;
  Weights unit_costs;
};

inline UnitView units_of(const Weights& item_costs, std::span<const int64_t> groups) {
  UnitView view;
  std::map<int64_t, size_t> unit_of_group;
  for (size_t i = 0; i < item_costs.size(); ++i) {
    size_t unit = i;
    if (!groups.empty()) {
      auto [it, inserted] = unit_of_group.emplace(groups[i], view.unit_costs.size());
      unit = it->second;
      if (inserted) view.unit_costs.push_back(0);
    } else {
      view.unit_costs.push_back(0);
    }
    view.unit_of_item.push_back(unit);
    view.unit_costs[unit] += item_costs[i];
  }
  return view;
}

inline bool counts_allowed(const std::vector<int64_t>& counts, balance::Cardinality cardinality) {
  if (cardinality == balance::Cardinality::kFree) return true;
  auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
  return cardinality == balance::Cardinality::kEqual ? *lo == *hi : *hi - *lo <= 1;
}

inline std::string describe(const Weights& weights, int64_t k, const balance::Options& options) {
  std::ostringstream out;
  out << "k=" << k << " cardinality=" << balance::to_string(options.cardinality)
      << " algorithm=" << balance::to_string(options.algorithm) << " workload=" << options.workload.name()
      << " weights=[";
  for (size_t i = 0; i < weights.size(); ++i) out << (i ? "," : "") << weights[i];
  out << "]";
  if (!options.groups.empty()) {
    out << " groups=[";
    for (size_t i = 0; i < options.groups.size(); ++i) out << (i ? "," : "") << options.groups[i];
    out << "]";
  }
  return out.str();
}

// Checks every promise of a Partition by recomputing it from the input:
// coverage, sorted parts, assignment, sums, cardinality, whole groups and the
// quality figures.
inline void expect_valid_partition(const Weights& weights, int64_t k, const balance::Options& options,
                                   const balance::Partition& result) {
  SCOPED_TRACE(describe(weights, k, options));
  const size_t n = weights.size();
  ASSERT_EQ(result.parts.size(), static_cast<size_t>(k));
  ASSERT_EQ(result.sums.size(), static_cast<size_t>(k));
  ASSERT_EQ(result.assignment.size(), n);

  const Weights costs = model_costs(weights, options.workload);
  const UnitView units = units_of(costs, options.groups);
  std::vector<int> seen(n, 0);
  std::vector<int64_t> unit_counts(static_cast<size_t>(k), 0);
  std::vector<int64_t> part_of_unit(units.unit_costs.size(), -1);
  for (size_t p = 0; p < result.parts.size(); ++p) {
    const auto& part = result.parts[p];
    EXPECT_TRUE(std::is_sorted(part.begin(), part.end())) << "part " << p << " is not ascending";
    __int128 sum = 0;
    for (int64_t item : part) {
      ASSERT_GE(item, 0);
      ASSERT_LT(item, static_cast<int64_t>(n));
      ++seen[item];
      EXPECT_EQ(result.assignment[item], static_cast<int64_t>(p)) << "item " << item;
      sum += costs[item];
      const size_t unit = units.unit_of_item[item];
      if (part_of_unit[unit] == -1) {
        part_of_unit[unit] = static_cast<int64_t>(p);
        ++unit_counts[p];
      } else {
        EXPECT_EQ(part_of_unit[unit], static_cast<int64_t>(p)) << "a group split at item " << item;
      }
    }
    EXPECT_EQ(static_cast<__int128>(result.sums[p]), sum) << "sum of part " << p;
  }
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "item " << i << " appears " << seen[i] << " times";
  EXPECT_TRUE(counts_allowed(unit_counts, options.cardinality)) << "unit counts break the cardinality";

  int64_t total = 0;
  for (int64_t c : costs) total += c;
  const int64_t largest = *std::max_element(units.unit_costs.begin(), units.unit_costs.end());
  const int64_t ceil_mean = total / k + (total % k != 0 ? 1 : 0);
  EXPECT_EQ(result.lower_bound, std::max(ceil_mean, largest));
  auto [lo, hi] = std::minmax_element(result.sums.begin(), result.sums.end());
  EXPECT_EQ(result.heaviest(), *hi);
  EXPECT_LE(result.lower_bound, *hi);
  EXPECT_GE(result.gap, 0.0);
  if (total > 0) {
    const double mean = static_cast<double>(total) / static_cast<double>(k);
    EXPECT_NEAR(result.spread, static_cast<double>(*hi - *lo) / mean, 1e-9 * (1 + result.spread));
    EXPECT_NEAR(result.max_over_mean, static_cast<double>(*hi) / mean, 1e-9 * result.max_over_mean);
    EXPECT_NEAR(result.gap, static_cast<double>(*hi) / static_cast<double>(result.lower_bound) - 1.0,
                1e-9 * (1 + result.gap));
  } else {
    // Nothing to balance: every figure must still be a finite number.
    EXPECT_EQ(result.spread, 0.0);
    EXPECT_EQ(result.gap, 0.0);
    EXPECT_TRUE(std::isfinite(result.max_over_mean));
  }
}

inline void expect_same_partition(const balance::Partition& a, const balance::Partition& b) {
  EXPECT_EQ(a.parts, b.parts);
  EXPECT_EQ(a.sums, b.sums);
  EXPECT_EQ(a.assignment, b.assignment);
  EXPECT_EQ(a.lower_bound, b.lower_bound);
  EXPECT_EQ(a.spread, b.spread);
  EXPECT_EQ(a.max_over_mean, b.max_over_mean);
  EXPECT_EQ(a.gap, b.gap);
}

// Every index 0..n-1 exactly once over the parts.
inline void expect_covers_each_index_once(const std::vector<std::vector<int64_t>>& parts, size_t n) {
  std::vector<int> seen(n, 0);
  for (const auto& part : parts) {
    for (int64_t item : part) {
      ASSERT_GE(item, 0);
      ASSERT_LT(item, static_cast<int64_t>(n));
      ++seen[item];
    }
  }
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "index " << i;
}

inline Weights uniform_lengths(Rng& rng, size_t n, int64_t lo, int64_t hi) {
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  Weights out(n);
  for (auto& w : out) w = dist(rng);
  return out;
}

// Sequence lengths of RL rollouts are roughly lognormal: many short, a long tail.
inline Weights lognormal_lengths(Rng& rng, size_t n, double mu = 6.5, double sigma = 1.0) {
  std::lognormal_distribution<double> dist(mu, sigma);
  Weights out(n);
  for (auto& w : out) w = 1 + static_cast<int64_t>(std::min(dist(rng), 1e7));
  return out;
}

// Group ids with exactly `count` distinct values, arbitrary (possibly negative,
// non-contiguous) ids, in shuffled item order; every group has an item.
inline Weights random_groups(Rng& rng, size_t n, size_t count) {
  std::uniform_int_distribution<int64_t> id(-1000000, 1000000);
  std::set<int64_t> distinct;
  while (distinct.size() < count) distinct.insert(id(rng));
  std::vector<int64_t> ids(distinct.begin(), distinct.end());
  Weights out(n);
  for (size_t i = 0; i < n; ++i) out[i] = i < count ? ids[i] : ids[rng() % count];
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

// The lightest possible heaviest part over every assignment of units to k
// parts that keeps the cardinality rule (k^units assignments: tiny inputs only).
inline int64_t brute_force_optimum(const Weights& unit_costs, int64_t k, balance::Cardinality cardinality) {
  const size_t units = unit_costs.size();
  std::vector<int64_t> part(units, 0);
  std::vector<int64_t> loads(static_cast<size_t>(k));
  std::vector<int64_t> counts(static_cast<size_t>(k));
  int64_t best = INT64_MAX;
  while (true) {
    std::fill(loads.begin(), loads.end(), 0);
    std::fill(counts.begin(), counts.end(), 0);
    for (size_t u = 0; u < units; ++u) {
      loads[part[u]] += unit_costs[u];
      ++counts[part[u]];
    }
    if (counts_allowed(counts, cardinality)) {
      best = std::min(best, *std::max_element(loads.begin(), loads.end()));
    }
    size_t u = 0;
    while (u < units && ++part[u] == k) part[u++] = 0;
    if (u == units) break;
  }
  return best;
}

inline balance::Options options_with(balance::Cardinality cardinality, balance::Algorithm algorithm,
                                     Workload workload = Workload::tokens(), std::span<const int64_t> groups = {}) {
  balance::Options options;
  options.cardinality = cardinality;
  options.algorithm = algorithm;
  options.workload = workload;
  options.groups = groups;
  return options;
}

inline constexpr balance::Cardinality kCardinalities[] = {balance::Cardinality::kFree, balance::Cardinality::kEqual,
                                                          balance::Cardinality::kBalanced};
inline constexpr balance::Algorithm kAlgorithms[] = {balance::Algorithm::kAuto, balance::Algorithm::kKK,
                                                     balance::Algorithm::kLPT};

}  // namespace seqflow::test
