// seqflow::balance::partition on worked examples: cardinality, groups,
// workloads, algorithms, quality figures, and every bad-input error.
#include <gtest/gtest.h>

#include "seqflow/balance.h"
#include "test_support.h"

namespace seqflow::balance {
namespace {

using test::expect_valid_partition;
using test::options_with;
using test::throws_invalid;
using test::Weights;

Partition run(const Weights& weights, int64_t k, const Options& options) {
  Partition result = partition(weights, k, options);
  expect_valid_partition(weights, k, options, result);
  return result;
}

Partition run(const Weights& weights, int64_t k, Cardinality cardinality = Cardinality::kFree,
              Algorithm algorithm = Algorithm::kAuto) {
  return run(weights, k, options_with(cardinality, algorithm));
}

TEST(ParseOptions, NamesRoundTrip) {
  for (Cardinality c : test::kCardinalities) EXPECT_EQ(parse_cardinality(to_string(c)), c);
  for (Algorithm a : test::kAlgorithms) EXPECT_EQ(parse_algorithm(to_string(a)), a);
  EXPECT_EQ(to_string(Cardinality::kBalanced), "balanced");
  EXPECT_EQ(to_string(Algorithm::kLPT), "lpt");
}

TEST(ParseOptions, UnknownNamesAreErrorsNamingParameterAndValue) {
  EXPECT_TRUE(throws_invalid([] { parse_cardinality("even"); }, {"cardinality", "'even'"}));
  EXPECT_TRUE(throws_invalid([] { parse_cardinality("Free"); }, {"cardinality", "'Free'"}));
  EXPECT_TRUE(throws_invalid([] { parse_algorithm("greedy"); }, {"algorithm", "'greedy'"}));
  EXPECT_TRUE(throws_invalid([] { parse_algorithm(""); }, {"algorithm", "''"}));
}

// The textbook case where largest differencing misses the optimum:
// KK gives 16 | 14 (see largest_differencing_test), the optimum is {8,7} | {6,5,4}.
TEST(Partition, AutoBeatsKKOnTheTextbookExample) {
  const Weights w = {8, 7, 6, 5, 4};
  const Partition kk = run(w, 2, Cardinality::kFree, Algorithm::kKK);
  EXPECT_EQ(kk.heaviest(), 16);
  const Partition best = run(w, 2);
  EXPECT_EQ(best.heaviest(), 15);
  EXPECT_EQ(best.lower_bound, 15);
  EXPECT_EQ(best.gap, 0.0);
  EXPECT_EQ(best.spread, 0.0);
  EXPECT_EQ(best.max_over_mean, 1.0);
  EXPECT_EQ(best.sums, (std::vector<int64_t>{15, 15}));
}

// LPT by its documented rule: 8 -> p0, 7 -> p1, 6 -> p1 (7 < 8), 5 -> p0 (8 < 13),
// 4 -> p0 (13 = 13, lower part wins): 17 | 13.
TEST(Partition, LptFollowsItsRule) {
  const Partition lpt = run({8, 7, 6, 5, 4}, 2, Cardinality::kFree, Algorithm::kLPT);
  EXPECT_EQ(lpt.parts, (std::vector<std::vector<int64_t>>{{0, 3, 4}, {1, 2}}));
  EXPECT_EQ(lpt.sums, (std::vector<int64_t>{17, 13}));
}

TEST(Partition, EqualCardinalityCostsBalance) {
  // Free: {10} | {1,1,1}. Equal (two each): {10,1} | {1,1} is forced.
  const Weights w = {10, 1, 1, 1};
  EXPECT_EQ(run(w, 2).heaviest(), 10);
  for (Algorithm a : test::kAlgorithms) {
    const Partition equal = run(w, 2, Cardinality::kEqual, a);
    EXPECT_EQ(equal.heaviest(), 11);
    EXPECT_EQ(equal.parts[0].size(), 2u);
    EXPECT_EQ(equal.parts[1].size(), 2u);
  }
  const Partition equal = run(w, 2, Cardinality::kEqual);
  // total 13, mean 6.5, sums 11 and 2, lower bound = largest item 10.
  EXPECT_EQ(equal.lower_bound, 10);
  EXPECT_DOUBLE_EQ(equal.spread, 9 / 6.5);
  EXPECT_DOUBLE_EQ(equal.max_over_mean, 11 / 6.5);
  EXPECT_NEAR(equal.gap, 0.1, 1e-12);
}

TEST(Partition, BalancedCardinalityAllowsAnyCount) {
  // Five items in two parts: three and two. {10,1} | {1,1,1} is the best such split.
  const Weights w = {1, 10, 1, 1, 1};
  for (Algorithm a : test::kAlgorithms) {
    const Partition balanced = run(w, 2, Cardinality::kBalanced, a);
    EXPECT_EQ(balanced.heaviest(), 11);
  }
  EXPECT_EQ(run(w, 2).heaviest(), 10);
  // n = k + 1 and n = 2k - 1 under balanced: some parts hold two, the rest one.
  for (int64_t k : {2, 3, 5, 8}) {
    for (int64_t n : {k, k + 1, 2 * k - 1, 3 * k + 2}) {
      run(Weights(static_cast<size_t>(n), 7), k, Cardinality::kBalanced);
    }
  }
}

TEST(Partition, EqualCardinalityNeedsAMultipleOfK) {
  const Weights w = {1, 2, 3, 4, 5};
  for (Algorithm a : test::kAlgorithms) {
    EXPECT_TRUE(throws_invalid([&] { partition(w, 2, options_with(Cardinality::kEqual, a)); },
                               {"cardinality", "equal", "5", "2", "balanced"}));
  }
  run(w, 5, Cardinality::kEqual);
  run(w, 1, Cardinality::kEqual);
}

TEST(Partition, GroupsStayWholeAndCountAsOne) {
  // Groups: A = items 0,1 (weight 10), B = item 2 (5), C = item 3 (5).
  const Weights w = {5, 5, 5, 5};
  const Weights groups = {0, 0, 1, 2};
  for (Algorithm a : test::kAlgorithms) {
    const Options free = options_with(Cardinality::kFree, a, Workload::tokens(), groups);
    const Partition p = run(w, 2, free);
    EXPECT_EQ(p.assignment[0], p.assignment[1]);
    // Three groups: equal is impossible for k = 2, balanced is fine.
    EXPECT_TRUE(
        throws_invalid([&] { partition(w, 2, options_with(Cardinality::kEqual, a, Workload::tokens(), groups)); },
                       {"groups", "3", "2", "balanced"}));
    run(w, 2, options_with(Cardinality::kBalanced, a, Workload::tokens(), groups));
  }
  const Partition best = run(w, 2, options_with(Cardinality::kFree, Algorithm::kAuto, Workload::tokens(), groups));
  EXPECT_EQ(best.heaviest(), 10);
  EXPECT_EQ(best.lower_bound, 10);
}

TEST(Partition, GroupWeightIsTheSumOfItsItemsWorkloads) {
  // Under verl the group {3, 4} costs cost(3) + cost(4), not cost(7).
  const Workload verl = Workload::verl();
  const Weights w = {3, 9, 4};
  const Weights groups = {42, 8, 42};
  const Partition p = run(w, 2, options_with(Cardinality::kFree, Algorithm::kAuto, verl, groups));
  EXPECT_EQ(p.assignment[0], p.assignment[2]);
  EXPECT_NE(p.assignment[0], p.assignment[1]);
  EXPECT_EQ(p.sums[p.assignment[0]], verl.cost(3) + verl.cost(4));
  EXPECT_EQ(p.sums[p.assignment[1]], verl.cost(9));
}

TEST(Partition, GroupIdValuesDoNotMatterOnlyTheirPattern) {
  const Weights w = {9, 4, 7, 3, 8, 1, 6};
  const Weights ids_a = {100, -5, 100, 7, -5, 100, 12};
  const Weights ids_b = {0, 1, 0, 2, 1, 0, 3};
  for (Cardinality c : {Cardinality::kFree, Cardinality::kBalanced}) {
    test::expect_same_partition(run(w, 3, options_with(c, Algorithm::kAuto, Workload::tokens(), ids_a)),
                                run(w, 3, options_with(c, Algorithm::kAuto, Workload::tokens(), ids_b)));
  }
}

TEST(Partition, WorkloadChangesWhatIsBalanced) {
  // One long sequence against many short ones: equal in tokens, not in verl cost.
  Weights w(9, 1000);
  w.push_back(9000);
  const Partition tokens = run(w, 2);
  EXPECT_EQ(tokens.heaviest(), 9000);
  const Options verl = options_with(Cardinality::kFree, Algorithm::kAuto, Workload::verl());
  const Partition p = run(w, 2, verl);
  // The long one costs more than all short ones together, so it stands alone.
  const int64_t long_cost = Workload::verl().cost(9000);
  EXPECT_EQ(p.heaviest(), long_cost);
  EXPECT_EQ(p.lower_bound, long_cost);
  EXPECT_EQ(p.parts[p.assignment[9]], (std::vector<int64_t>{9}));
  const Options quad = options_with(Cardinality::kFree, Algorithm::kAuto, Workload::quadratic(0, 1));
  EXPECT_EQ(run(w, 2, quad).heaviest(), int64_t{9000} * 9000);
}

TEST(Partition, SinglePartHoldsEverything) {
  const Weights w = {3, 0, 8, 2};
  for (Cardinality c : test::kCardinalities) {
    const Partition p = run(w, 1, c);
    EXPECT_EQ(p.parts[0], (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(p.sums[0], 13);
    EXPECT_EQ(p.lower_bound, 13);
    EXPECT_EQ(p.gap, 0.0);
  }
}

TEST(Partition, AsManyPartsAsItems) {
  const Weights w = {3, 9, 1, 4, 4};
  for (Cardinality c : test::kCardinalities) {
    for (Algorithm a : test::kAlgorithms) {
      const Partition p = run(w, 5, options_with(c, a));
      EXPECT_EQ(p.heaviest(), 9);
      if (c != Cardinality::kFree) {
        for (const auto& part : p.parts) EXPECT_EQ(part.size(), 1u);
      }
    }
  }
}

TEST(Partition, AllZeroWeightsGiveFiniteFigures) {
  for (Cardinality c : test::kCardinalities) run(Weights(6, 0), 3, c);
}

TEST(Partition, LowerBoundIsTheLargestUnitWhenThatDominates) {
  const Partition p = run({100, 1, 2, 3}, 3);
  EXPECT_EQ(p.lower_bound, 100);
  EXPECT_EQ(p.heaviest(), 100);
  // ceil(total / k) when it dominates: 7 / 2 -> 4.
  const Partition q = run({2, 2, 3}, 2);
  EXPECT_EQ(q.lower_bound, 4);
  EXPECT_EQ(q.heaviest(), 4);
}

TEST(Partition, SameInputSameOutput) {
  test::Rng rng(test::kSeed + 10);
  const Weights w = test::lognormal_lengths(rng, 512);
  for (Cardinality c : test::kCardinalities) {
    for (Algorithm a : test::kAlgorithms) {
      const Options o = options_with(c, a, Workload::verl());
      test::expect_same_partition(partition(w, 8, o), partition(w, 8, o));
    }
  }
}

// ---- bad input ---------------------------------------------------------------

TEST(PartitionErrors, EmptyWeights) {
  EXPECT_TRUE(throws_invalid([] { partition(Weights{}, 1); }, {"weights", "empty"}));
}

TEST(PartitionErrors, NonPositiveK) {
  const Weights w = {1, 2, 3};
  EXPECT_TRUE(throws_invalid([&] { partition(w, 0); }, {"k", "0"}));
  EXPECT_TRUE(throws_invalid([&] { partition(w, -3); }, {"k", "-3"}));
}

TEST(PartitionErrors, MorePartsThanItemsOrGroups) {
  const Weights w = {1, 2, 3};
  EXPECT_TRUE(throws_invalid([&] { partition(w, 4); }, {"k", "4", "items", "3"}));
  const Weights groups = {5, 5, 6};
  for (Cardinality c : test::kCardinalities) {
    EXPECT_TRUE(throws_invalid([&] { partition(w, 3, options_with(c, Algorithm::kAuto, Workload::tokens(), groups)); },
                               {"k", "3", "groups", "2"}));
  }
}

TEST(PartitionErrors, GroupsOfTheWrongLength) {
  const Weights w = {1, 2, 3};
  const Weights groups = {0, 1};
  EXPECT_TRUE(throws_invalid(
      [&] { partition(w, 1, options_with(Cardinality::kFree, Algorithm::kAuto, Workload::tokens(), groups)); },
      {"groups", "2", "3"}));
}

TEST(PartitionErrors, NegativeWeightNamesIndexAndValue) {
  const Weights w = {4, 2, -9, 1};
  for (Algorithm a : test::kAlgorithms) {
    EXPECT_TRUE(throws_invalid([&] { partition(w, 2, options_with(Cardinality::kFree, a)); }, {"weights[2]", "-9"}));
  }
}

TEST(PartitionErrors, TotalWorkloadOverflowIsAnError) {
  // Each verl cost of 3e9 fits in int64 (about 9.00007e18); their sum does not.
  const Weights long_ones = {3000000000, 3000000000};
  const Options verl = options_with(Cardinality::kFree, Algorithm::kAuto, Workload::verl());
  EXPECT_TRUE(throws_invalid([&] { partition(long_ones, 1, verl); }, {"weights", "verl", "overflow"}));
  // Token sums beyond int64.
  const Weights big = {INT64_MAX / 2, INT64_MAX / 2, 10};
  EXPECT_TRUE(throws_invalid([&] { partition(big, 2); }, {"weights", "overflow"}));
  const Weights max = {INT64_MAX, 1};
  EXPECT_TRUE(throws_invalid([&] { partition(max, 2); }, {"weights", "overflow"}));
  // Grouped items overflow the same way.
  const Weights groups = {1, 1, 2};
  EXPECT_TRUE(throws_invalid(
      [&] { partition(big, 2, options_with(Cardinality::kFree, Algorithm::kAuto, Workload::tokens(), groups)); },
      {"weights", "overflow"}));
}

// A single length whose cost overflows: the error must say which weight.
TEST(PartitionErrors, ItemCostOverflowNamesTheWeight) {
  const Weights w = {10, 4000000000};
  const Options verl = options_with(Cardinality::kFree, Algorithm::kAuto, Workload::verl());
  EXPECT_TRUE(throws_invalid([&] { partition(w, 2, verl); }, {"weights", "4000000000", "overflow"}));
}

// k_partitions beyond the items only adds empty parts: allowed as in verl,
// but not 2^40 of them (that used to throw bad_alloc).
TEST(VerlCompat, HugeKPartitionsIsRefusedBeforeAllocating) {
  const Weights lengths = {5, 3, 2};
  EXPECT_TRUE(throws_invalid([&] { karmarkar_karp(lengths, int64_t{1} << 40, false); },
                             {"k_partitions", "1099511627776", "1048576"}));
  EXPECT_EQ(karmarkar_karp(lengths, 5, false).size(), 5u);
}

}  // namespace
}  // namespace seqflow::balance
