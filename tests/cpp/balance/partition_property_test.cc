// Properties of seqflow::balance::partition over random inputs (fixed-seed
// std::mt19937_64): validity, determinism, auto never worse than kk or lpt,
// quality on realistic batches, and optimality on tiny inputs by brute force.
#include <gtest/gtest.h>

#include "seqflow/balance.h"
#include "test_support.h"

namespace seqflow::balance {
namespace {

using test::expect_valid_partition;
using test::options_with;
using test::Rng;
using test::Weights;

struct Case {
  Weights weights;
  Weights groups;  // empty: no groups
  int64_t k = 1;
  Workload workload = Workload::tokens();
};

size_t unit_count(const Case& c) {
  return c.groups.empty() ? c.weights.size() : std::set<int64_t>(c.groups.begin(), c.groups.end()).size();
}

// Lengths of several shapes: spread out, realistic, many ties, all equal, many zeros, huge.
Weights random_weights(Rng& rng, size_t n, int shape) {
  switch (shape) {
    case 0:
      return test::uniform_lengths(rng, n, 0, 1000);
    case 1:
      return test::lognormal_lengths(rng, n);
    case 2:
      return test::uniform_lengths(rng, n, 0, 3);
    case 3:
      return Weights(n, test::uniform_lengths(rng, 1, 0, 50)[0]);
    case 4: {
      Weights w = test::uniform_lengths(rng, n, 0, 100);
      for (auto& x : w) x = rng() % 2 ? 0 : x;
      return w;
    }
    default:
      return test::uniform_lengths(rng, n, 0, int64_t{1} << 40);
  }
}

Case random_case(Rng& rng, int round, size_t max_n, int64_t max_k) {
  Case c;
  const int shape = round % 6;
  const size_t n = 1 + rng() % max_n;
  c.weights = random_weights(rng, n, shape);
  if (rng() % 3 == 0) c.groups = test::random_groups(rng, n, 1 + rng() % n);
  c.k = 1 + static_cast<int64_t>(rng() % std::min<size_t>(unit_count(c), static_cast<size_t>(max_k)));
  if (shape != 5) {  // huge lengths stay in tokens, where their sums fit
    const Workload models[] = {Workload::tokens(), Workload::verl(), Workload::quadratic(3, 2)};
    c.workload = models[rng() % 3];
  }
  return c;
}

Options case_options(const Case& c, Cardinality cardinality, Algorithm algorithm) {
  return options_with(cardinality, algorithm, c.workload, c.groups);
}

// Runs every algorithm on every cardinality: valid, deterministic, and auto
// no heavier than kk or lpt. Returns how many partitions it checked.
int check_case(const Case& c) {
  int checked = 0;
  for (Cardinality cardinality : test::kCardinalities) {
    if (cardinality == Cardinality::kEqual && unit_count(c) % c.k != 0) {
      EXPECT_TRUE(test::throws_invalid(
          [&] { partition(c.weights, c.k, case_options(c, cardinality, Algorithm::kAuto)); }, {"balanced"}));
      continue;
    }
    int64_t heaviest[3] = {};
    for (int a = 0; a < 3; ++a) {
      const Options options = case_options(c, cardinality, test::kAlgorithms[a]);
      const Partition first = partition(c.weights, c.k, options);
      expect_valid_partition(c.weights, c.k, options, first);
      test::expect_same_partition(first, partition(c.weights, c.k, options));
      heaviest[a] = first.heaviest();
      ++checked;
    }
    SCOPED_TRACE(test::describe(c.weights, c.k, case_options(c, cardinality, Algorithm::kAuto)));
    EXPECT_LE(heaviest[0], heaviest[1]) << "auto is heavier than kk";
    EXPECT_LE(heaviest[0], heaviest[2]) << "auto is heavier than lpt";
  }
  return checked;
}

TEST(PartitionProperty, SmallRandomInputs) {
  Rng rng(test::kSeed + 20);
  int checked = 0;
  for (int round = 0; round < 400; ++round) {
    checked += check_case(random_case(rng, round, 40, 12));
    if (HasFailure()) break;  // the first failing case is the useful one
  }
  EXPECT_GT(checked, 2500);
}

TEST(PartitionProperty, LargerRandomInputs) {
  Rng rng(test::kSeed + 21);
  for (int round = 0; round < 16; ++round) {
    check_case(random_case(rng, round, 2000, 64));
    if (HasFailure()) break;
  }
}

// A bound that also counts items: the part holding the largest unit holds at
// least floor(n / k) units under equal or balanced cardinality, so it weighs at
// least the largest plus the floor(n / k) - 1 smallest others.
int64_t cardinality_bound(const Weights& unit_costs, int64_t k, Cardinality cardinality) {
  if (cardinality == Cardinality::kFree) return 0;
  Weights sorted = unit_costs;
  std::sort(sorted.begin(), sorted.end());
  const size_t others = sorted.size() / static_cast<size_t>(k) - 1;
  int64_t bound = sorted.back();
  for (size_t i = 0; i < others; ++i) bound += sorted[i];
  return bound;
}

const std::pair<Cardinality, Workload> kQualityCases[] = {
    {Cardinality::kFree, Workload::tokens()},     {Cardinality::kEqual, Workload::tokens()},
    {Cardinality::kBalanced, Workload::tokens()}, {Cardinality::kFree, Workload::verl()},
    {Cardinality::kEqual, Workload::verl()},      {Cardinality::kBalanced, Workload::verl()}};

// Realistic batches: with ten or more lognormal lengths per part, auto ends
// within 0.1% of the lower bound (free), or of the bound that also counts
// items (equal, balanced: lower_bound ignores counts, so its gap can stay large
// when one long sequence must share its part with n/k - 1 others).
TEST(PartitionProperty, AutoIsNearTheLowerBoundWithTenOrMoreItemsPerPart) {
  Rng rng(test::kSeed + 22);
  for (int64_t k : {2, 3, 4, 8, 16, 32, 64}) {
    for (int64_t per_part : {10, 13, 40}) {
      const Weights w = test::lognormal_lengths(rng, static_cast<size_t>(k * per_part));
      for (auto [cardinality, workload] : kQualityCases) {
        const Options options = options_with(cardinality, Algorithm::kAuto, workload);
        const Partition p = partition(w, k, options);
        expect_valid_partition(w, k, options, p);
        const int64_t bound =
            std::max(p.lower_bound, cardinality_bound(test::model_costs(w, workload), k, cardinality));
        const double gap = static_cast<double>(p.heaviest()) / static_cast<double>(bound) - 1.0;
        SCOPED_TRACE(::testing::Message() << "k=" << k << " n=" << w.size() << " cardinality=" << to_string(cardinality)
                                          << " workload=" << workload.name() << " heaviest=" << p.heaviest()
                                          << " lower_bound=" << p.lower_bound << " bound=" << bound);
        EXPECT_LT(gap, 0.001);
        if (cardinality == Cardinality::kFree) {
          EXPECT_LT(p.gap, 0.001);
        }
      }
    }
  }
}

// Tiny inputs (n <= 8, k <= 3, with and without groups) and their true
// optimum, found by enumerating every assignment that keeps the cardinality.
template <class Check>
int for_each_tiny_case(Check check) {
  Rng rng(test::kSeed + 23);
  int compared = 0;
  for (int round = 0; round < 400; ++round) {
    Case c;
    const size_t n = 1 + rng() % 8;
    c.weights = round % 2 ? test::uniform_lengths(rng, n, 0, 20) : test::uniform_lengths(rng, n, 1, 1000);
    if (round % 3 == 0) c.groups = test::random_groups(rng, n, 1 + rng() % n);
    c.k = 1 + static_cast<int64_t>(rng() % std::min<size_t>(unit_count(c), 3));
    const Weights unit_costs = test::units_of(c.weights, c.groups).unit_costs;
    for (Cardinality cardinality : test::kCardinalities) {
      if (cardinality == Cardinality::kEqual && unit_costs.size() % c.k != 0) continue;
      const int64_t optimum = test::brute_force_optimum(unit_costs, c.k, cardinality);
      SCOPED_TRACE(test::describe(c.weights, c.k, case_options(c, cardinality, Algorithm::kAuto)));
      check(c, cardinality, optimum);
      ++compared;
    }
  }
  return compared;
}

// The lower bound never exceeds the optimum; no algorithm beats it; auto is
// no heavier than kk or lpt.
TEST(PartitionProperty, TinyInputsBoundsAgainstBruteForce) {
  int kk_suboptimal = 0;
  const int compared = for_each_tiny_case([&](const Case& c, Cardinality cardinality, int64_t optimum) {
    const Partition best = partition(c.weights, c.k, case_options(c, cardinality, Algorithm::kAuto));
    const Partition kk = partition(c.weights, c.k, case_options(c, cardinality, Algorithm::kKK));
    const Partition lpt = partition(c.weights, c.k, case_options(c, cardinality, Algorithm::kLPT));
    EXPECT_LE(best.lower_bound, optimum);
    EXPECT_GE(best.heaviest(), optimum);
    EXPECT_LE(best.heaviest(), kk.heaviest());
    EXPECT_LE(best.heaviest(), lpt.heaviest());
    EXPECT_GE(kk.heaviest(), optimum);
    EXPECT_GE(lpt.heaviest(), optimum);
    kk_suboptimal += kk.heaviest() > optimum;
  });
  EXPECT_GT(compared, 700);
  // The comparison has teeth only if kk alone is sometimes beaten.
  EXPECT_GT(kk_suboptimal, 0);
}

// Auto reaches the optimum on tiny inputs. Lists every miss in one failure.
TEST(PartitionProperty, TinyInputsAutoReachesTheOptimum) {
  int misses = 0;
  std::ostringstream report;
  const int compared = for_each_tiny_case([&](const Case& c, Cardinality cardinality, int64_t optimum) {
    const Options options = case_options(c, cardinality, Algorithm::kAuto);
    const int64_t heaviest = partition(c.weights, c.k, options).heaviest();
    if (heaviest != optimum && ++misses <= 10) {
      report << "\n  " << test::describe(c.weights, c.k, options) << ": auto " << heaviest << ", optimum " << optimum;
    }
  });
  EXPECT_EQ(misses, 0) << "auto misses the optimum in " << misses << " of " << compared
                       << " tiny cases; the first ones:" << report.str();
}

}  // namespace
}  // namespace seqflow::balance
