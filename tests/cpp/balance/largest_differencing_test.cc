// Largest differencing (Karmarkar-Karp), its value order, and the verl-compatible
// karmarkar_karp / get_seqlen_balanced_partitions with their error cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "balance/largest_differencing.h"
#include "balance/value_order.h"
#include "seqflow/balance.h"
#include "test_support.h"

namespace seqflow::balance {
namespace {

using test::Rng;
using test::throws_invalid;
using test::Weights;
using Parts = std::vector<std::vector<int64_t>>;

int64_t sum_of(const std::vector<int64_t>& items, const Weights& values) {
  int64_t sum = 0;
  for (int64_t i : items) sum += values[i];
  return sum;
}

// ---- value order ----------------------------------------------------------

std::vector<int64_t> sorted_indexes(const Weights& values, detail::Direction direction) {
  std::vector<int64_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return direction == detail::Direction::kAscending ? values[a] < values[b] : values[a] > values[b];
  });
  return order;
}

TEST(ValueOrder, MatchesAStableSortOnRandomValues) {
  Rng rng(test::kSeed);
  // Narrow ranges take the packed radix path, full int64 ranges the comparison sort.
  const std::pair<int64_t, int64_t> ranges[] = {
      {0, 0}, {0, 3}, {-5, 5}, {0, 100000}, {-(int64_t{1} << 40), int64_t{1} << 40}, {INT64_MIN, INT64_MAX}};
  for (auto [lo, hi] : ranges) {
    for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{255}, size_t{256}, size_t{257}, size_t{5000}}) {
      const Weights values = test::uniform_lengths(rng, n, lo, hi);
      for (auto direction : {detail::Direction::kAscending, detail::Direction::kDescending}) {
        EXPECT_EQ(detail::order_by_value(values, direction), sorted_indexes(values, direction))
            << "n=" << n << " range [" << lo << ", " << hi << "]";
      }
    }
  }
  EXPECT_TRUE(detail::order_by_value({}, detail::Direction::kAscending).empty());
}

TEST(ValueOrder, ExtremeValuesTogether) {
  const Weights values = {INT64_MAX, INT64_MIN, 0, -1, INT64_MAX, 1, INT64_MIN};
  for (auto direction : {detail::Direction::kAscending, detail::Direction::kDescending}) {
    EXPECT_EQ(detail::order_by_value(values, direction), sorted_indexes(values, direction));
  }
}

// ---- the differencing core -------------------------------------------------

TEST(LargestDifferencing, PartsAreHeaviestFirstAndSumsMatch) {
  Rng rng(test::kSeed + 1);
  for (int round = 0; round < 300; ++round) {
    const size_t n = 1 + rng() % 60;
    const int64_t k = 1 + static_cast<int64_t>(rng() % 10);
    const Weights values = test::uniform_lengths(rng, n, 0, round % 2 ? 3 : 10000);
    const auto ascending = detail::order_by_value(values, detail::Direction::kAscending);
    for (auto start : {detail::DifferencingStart::kOneItemPerState, detail::DifferencingStart::kSortedChunks}) {
      if (start == detail::DifferencingStart::kSortedChunks && static_cast<int64_t>(n) < k) continue;
      auto result = detail::largest_differencing(values, ascending, k, start);
      ASSERT_EQ(result.parts.size(), static_cast<size_t>(k));
      ASSERT_EQ(result.sums.size(), static_cast<size_t>(k));
      test::expect_covers_each_index_once(result.parts, n);
      for (size_t p = 0; p < result.parts.size(); ++p) {
        EXPECT_EQ(result.sums[p], sum_of(result.parts[p], values));
      }
      EXPECT_TRUE(std::is_sorted(result.sums.rbegin(), result.sums.rend())) << "not heaviest first";
      if (start == detail::DifferencingStart::kSortedChunks) {
        // Chunks of k sorted items (a short first chunk of n % k): counts within one.
        auto [lo, hi] = std::minmax_element(result.parts.begin(), result.parts.end(),
                                            [](auto& a, auto& b) { return a.size() < b.size(); });
        EXPECT_LE(hi->size() - lo->size(), 1u);
      }
    }
  }
}

// ---- verl-compatible functions ---------------------------------------------

// Worked by hand with verl's algorithm: states {8},{7} difference to ({8},{7});
// {6},{5} to ({6},{5}); {4} then meets ({8},{7}) (the tie on spread 1 goes to
// the larger top set) giving ({4,7},{8}); that meets ({6},{5}) giving
// ({4,7,5} = 16, {8,6} = 14). The optimum is 15 ({8,7} | {6,5,4}).
TEST(VerlKarmarkarKarp, TextbookExampleByHand) {
  const Weights lengths = {8, 7, 6, 5, 4};
  EXPECT_EQ(karmarkar_karp(lengths, 2, false), (Parts{{4, 1, 3}, {0, 2}}));
  EXPECT_EQ(get_seqlen_balanced_partitions(lengths, 2, false), (Parts{{1, 3, 4}, {0, 2}}));
}

// equal_size: sorted chunks {3,4}, {5,6}, {7,8} become ({4},{3}), ({6},{5}),
// ({8},{7}), all of spread 1. ({8},{7}) and ({6},{5}) pop first (larger top
// sets) and give ({7,6}, {8,5}): equal sums and counts, and (idx 0, 8) sorts
// before (idx 1, 7), so {8,5} is the smaller set. ({4},{3}) then takes them
// in reverse: ({4,8,5} = 17, {3,7,6} = 16).
TEST(VerlKarmarkarKarp, EqualSizeExampleByHand) {
  const Weights lengths = {8, 7, 6, 5, 4, 3};
  EXPECT_EQ(karmarkar_karp(lengths, 2, true), (Parts{{4, 0, 3}, {5, 1, 2}}));
  EXPECT_EQ(get_seqlen_balanced_partitions(lengths, 2, true), (Parts{{0, 3, 4}, {1, 2, 5}}));
}

TEST(VerlKarmarkarKarp, SingleItemAndSinglePart) {
  EXPECT_EQ(karmarkar_karp(Weights{42}, 1, false), (Parts{{0}}));
  EXPECT_EQ(karmarkar_karp(Weights{42}, 1, true), (Parts{{0}}));
  const Weights lengths = {5, 1, 9, 3};
  auto one = get_seqlen_balanced_partitions(lengths, 1, false);
  EXPECT_EQ(one, (Parts{{0, 1, 2, 3}}));
}

TEST(VerlKarmarkarKarp, FewerItemsThanPartsLeavesEmptyParts) {
  const Weights lengths = {4, 9};
  auto parts = karmarkar_karp(lengths, 5, false);
  ASSERT_EQ(parts.size(), 5u);
  test::expect_covers_each_index_once(parts, lengths.size());
  EXPECT_EQ(std::count_if(parts.begin(), parts.end(), [](auto& p) { return p.empty(); }), 3);
  // Heaviest first, as in verl's final state.
  EXPECT_EQ(parts[0], (std::vector<int64_t>{1}));
  EXPECT_EQ(parts[1], (std::vector<int64_t>{0}));
}

TEST(VerlKarmarkarKarp, StructureOnRandomInputs) {
  Rng rng(test::kSeed + 2);
  int empty_part_errors = 0;
  int returned = 0;
  for (int round = 0; round < 1000; ++round) {
    const size_t n = 1 + rng() % 24;
    const int64_t k = 1 + static_cast<int64_t>(rng() % 8);
    Weights lengths = round % 3 == 0   ? test::uniform_lengths(rng, n, 0, 3)
                      : round % 3 == 1 ? test::uniform_lengths(rng, n, -50, 50)
                                       : test::uniform_lengths(rng, n, 0, 100000);
    for (bool equal_size : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "round " << round << " n=" << n << " k=" << k
                                        << " equal_size=" << equal_size);
      if (equal_size && n % k != 0) continue;
      const Parts kk = karmarkar_karp(lengths, k, equal_size);
      ASSERT_EQ(kk.size(), static_cast<size_t>(k));
      test::expect_covers_each_index_once(kk, n);
      if (equal_size) {
        for (const auto& part : kk) EXPECT_EQ(part.size(), n / k);
      }
      if (static_cast<int64_t>(n) < k) {
        EXPECT_TRUE(throws_invalid([&] { get_seqlen_balanced_partitions(lengths, k, equal_size); },
                                   {"k_partitions", std::to_string(n), std::to_string(k)}));
        continue;
      }
      // get_seqlen_balanced_partitions is karmarkar_karp with each part sorted,
      // or an error where verl's check of an empty part would fail.
      const bool has_empty = std::any_of(kk.begin(), kk.end(), [](auto& p) { return p.empty(); });
      if (has_empty) {
        ++empty_part_errors;
        EXPECT_TRUE(
            throws_invalid([&] { get_seqlen_balanced_partitions(lengths, k, equal_size); }, {"empty", "balanced"}));
        continue;
      }
      ++returned;
      Parts sorted = kk;
      for (auto& part : sorted) std::sort(part.begin(), part.end());
      EXPECT_EQ(get_seqlen_balanced_partitions(lengths, k, equal_size), sorted);
      EXPECT_EQ(karmarkar_karp(lengths, k, equal_size), kk) << "not deterministic";
    }
  }
  EXPECT_GT(returned, 700);
  EXPECT_GT(empty_part_errors, 0) << "no input reached verl's empty-part assertion";
}

TEST(VerlKarmarkarKarp, BadInputRaisesInsteadOfAsserting) {
  const Weights five = {1, 2, 3, 4, 5};
  EXPECT_TRUE(throws_invalid([&] { karmarkar_karp(five, 0, false); }, {"k_partitions", "0"}));
  EXPECT_TRUE(throws_invalid([&] { karmarkar_karp(five, -2, true); }, {"k_partitions", "-2"}));
  EXPECT_TRUE(throws_invalid([&] { karmarkar_karp(Weights{}, 2, false); }, {"seqlen_list", "empty"}));
  EXPECT_TRUE(throws_invalid([&] { karmarkar_karp(five, 2, true); }, {"equal_size", "k_partitions", "5", "2"}));
  EXPECT_TRUE(throws_invalid([&] { get_seqlen_balanced_partitions(five, 3, true); }, {"equal_size", "5", "3"}));
  EXPECT_TRUE(throws_invalid([&] { get_seqlen_balanced_partitions(five, 6, false); }, {"k_partitions", "5", "6"}));
  EXPECT_TRUE(throws_invalid([&] { get_seqlen_balanced_partitions(five, 0, false); }, {"k_partitions", "0"}));
  EXPECT_TRUE(throws_invalid([&] { get_seqlen_balanced_partitions(Weights{}, 1, false); }, {"k_partitions", "0"}));
}

TEST(VerlKarmarkarKarp, MagnitudeOverflowIsAnError) {
  const Weights huge = {INT64_MAX / 2, INT64_MAX / 2, 2};
  EXPECT_TRUE(throws_invalid([&] { karmarkar_karp(huge, 2, false); }, {"seqlen_list", "overflow"}));
  // Negative values count by magnitude: their differences could overflow too.
  const Weights mixed = {INT64_MAX / 2 + 1, -(INT64_MAX / 2) - 1};
  EXPECT_TRUE(throws_invalid([&] { karmarkar_karp(mixed, 2, false); }, {"seqlen_list", "overflow"}));
  const Weights minimum = {INT64_MIN, 1};
  EXPECT_TRUE(throws_invalid([&] { get_seqlen_balanced_partitions(minimum, 1, false); }, {"seqlen_list", "overflow"}));
}

}  // namespace
}  // namespace seqflow::balance
