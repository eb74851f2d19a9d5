#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "seqflow/error.h"
#include "seqflow/pack.h"
#include "test_support.h"

namespace seqflow::pack {
namespace {

void expect_guarantees(const MicroBatchPlan& plan, std::span<const int64_t> lengths, int64_t cap,
                       const MicroBatchOptions& options) {
  ASSERT_EQ(static_cast<int64_t>(plan.batches.size()), options.dp_size);
  std::vector<int> seen(lengths.size(), 0);
  for (size_t rank = 0; rank < plan.batches.size(); ++rank) {
    const auto count = static_cast<int64_t>(plan.batches[rank].size());
    EXPECT_EQ(count % options.count_multiple, 0);
    EXPECT_GE(count, plan.min_counts[rank]);
    if (options.same_count_across_ranks) {
      EXPECT_EQ(plan.batches[rank].size(), plan.batches[0].size());
    }
    for (size_t b = 0; b < plan.batches[rank].size(); ++b) {
      int64_t tokens = 0;
      for (int64_t s : plan.batches[rank][b]) {
        ++seen.at(s);
        tokens += lengths[s];
      }
      EXPECT_EQ(plan.tokens[rank][b], tokens);
      EXPECT_LE(tokens, cap);
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "sample " << i;
}

TEST(PackMicroBatches, GuaranteesHoldOnRandomInputs) {
  std::mt19937_64 rng(9);
  for (int64_t n : {0, 1, 5, 17, 200, 400}) {
    for (int64_t dp : {1, 2, 8}) {
      for (int64_t multiple : {1, 4}) {
        for (bool same : {true, false}) {
          const int64_t cap = 4096;
          std::uniform_int_distribution<int64_t> dist(0, cap);
          std::vector<int64_t> lengths(static_cast<size_t>(n));
          for (auto& v : lengths) v = dist(rng);
          MicroBatchOptions options{.dp_size = dp, .same_count_across_ranks = same, .count_multiple = multiple};
          SCOPED_TRACE(testing::Message() << "n=" << n << " dp=" << dp << " multiple=" << multiple);
          expect_guarantees(micro_batches(lengths, cap, options), lengths, cap, options);
        }
      }
    }
  }
}

TEST(PackMicroBatches, FewestBatchesUnderTheCap) {
  // 3 x 60 and 3 x 40 tokens under a cap of 100: three batches of 60 + 40.
  std::vector<int64_t> lengths = {60, 40, 60, 40, 60, 40};
  MicroBatchPlan plan = micro_batches(lengths, 100, {});
  ASSERT_EQ(plan.batches[0].size(), 3u);
  for (int64_t tokens : plan.tokens[0]) EXPECT_EQ(tokens, 100);
}

TEST(PackMicroBatches, CapIsEnforcedWhereCeilWouldBreakIt) {
  // ceil(210 / 100) = 3, but 70 x 3 fits only as one per batch... plus pairs of 70 do not fit.
  std::vector<int64_t> lengths = {70, 70, 70};
  MicroBatchPlan plan = micro_batches(lengths, 100, {});
  EXPECT_EQ(plan.batches[0].size(), 3u);
  std::vector<int64_t> odd = {51, 51, 51, 51, 10};
  plan = micro_batches(odd, 100, {});
  EXPECT_EQ(plan.batches[0].size(), 4u);
  for (int64_t tokens : plan.tokens[0]) EXPECT_LE(tokens, 100);
}

TEST(PackMicroBatches, ManyBinsOfOneSampleEach) {
  // Every sample is over half the cap: one per micro-batch, found by the
  // best-fit packer without the engine's O(n k log k) search per probe.
  std::vector<int64_t> lengths(3000, 5001);
  MicroBatchPlan plan = micro_batches(lengths, 10000, {});
  EXPECT_EQ(plan.batches[0].size(), 3000u);
  EXPECT_EQ(plan.min_counts[0], 3000);
}

TEST(PackMicroBatches, SameCountAcrossRanksPerRankInput) {
  std::vector<int64_t> a = {90, 90, 90, 90};
  std::vector<int64_t> b = {10, 10};
  std::vector<std::span<const int64_t>> ranks = {a, b};
  MicroBatchPlan plan = micro_batches_per_rank(ranks, 100, {.dp_size = 2});
  EXPECT_EQ(plan.batches[0].size(), 4u);
  EXPECT_EQ(plan.batches[1].size(), 4u);
  EXPECT_EQ(plan.empty_batches, 2);
  EXPECT_EQ(plan.min_counts, (std::vector<int64_t>{4, 1}));
  plan = micro_batches_per_rank(ranks, 100, {.dp_size = 2, .same_count_across_ranks = false});
  EXPECT_EQ(plan.batches[1].size(), 1u);
  EXPECT_THROW(micro_batches_per_rank(ranks, 100, {.dp_size = 3}), Error);
}

TEST(PackMicroBatches, InterleaveAlternatesLargeAndSmall) {
  std::vector<int64_t> lengths = {100, 80, 60, 40, 20, 10};
  MicroBatchPlan plan = micro_batches(lengths, 100, {.count_multiple = 6});
  ASSERT_EQ(plan.tokens[0], (std::vector<int64_t>{100, 10, 80, 20, 60, 40}));
  plan = micro_batches(lengths, 100, {.count_multiple = 6, .order = MicroBatchOrder::kDescending});
  ASSERT_EQ(plan.tokens[0], (std::vector<int64_t>{100, 80, 60, 40, 20, 10}));
}

TEST(PackMicroBatches, BadInputIsNamed) {
  std::vector<int64_t> lengths = {5, 500};
  try {
    micro_batches(lengths, 100, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lengths[1] = 500"), std::string::npos) << e.what();
  }
  EXPECT_THROW(micro_batches(lengths, 0, {}), Error);
  EXPECT_THROW(micro_batches(lengths, 1000, {.dp_size = 0}), Error);
  EXPECT_THROW(micro_batches(lengths, 1000, {.count_multiple = 0}), Error);
  EXPECT_THROW(parse_micro_batch_order("zigzag"), Error);
}

TEST(PackMicroBatches, InversePermutationRestoresOrder) {
  std::vector<int64_t> order = {3, 0, 2, 1};
  auto inverse = inverse_permutation(order);
  EXPECT_EQ(inverse, (std::vector<int64_t>{1, 3, 2, 0}));
  for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(order[inverse[j]], j);
  std::vector<int64_t> bad = {0, 0};
  EXPECT_THROW(inverse_permutation(bad), Error);
  std::vector<int64_t> out_of_range = {0, 2};
  EXPECT_THROW(inverse_permutation(out_of_range), Error);
}

// count_multiple and dp_size are checked against the plan's size before any
// micro-batch is allocated (count_multiple = 2^40 used to throw bad_alloc).
TEST(PackMicroBatches, HugeCountsAreRefusedBeforeAllocating) {
  const std::vector<int64_t> lengths = {1, 2, 3};
  const int64_t huge = int64_t{1} << 40;
  EXPECT_TRUE(test::throws_invalid([&] { micro_batches(lengths, 10, {.count_multiple = huge}); },
                                   {"count_multiple", "1099511627776", "1048576"}));
  EXPECT_TRUE(test::throws_invalid([&] { micro_batches(lengths, 10, {.dp_size = huge}); },
                                   {"dp_size", "1099511627776", "1048576"}));
  EXPECT_TRUE(test::throws_invalid([&] { micro_batches(lengths, 10, {.dp_size = 1024, .count_multiple = 2048}); },
                                   {"dp_size x count_multiple (1024 x 2048)"}));
  // 1025 one-token samples under a cap of one token on one of 1024 ranks:
  // 1025 micro-batches on every rank, 1049600 in all.
  const std::vector<int64_t> ones(1025, 1);
  std::vector<std::span<const int64_t>> per_rank(1024);
  per_rank[0] = ones;
  EXPECT_TRUE(test::throws_invalid([&] { micro_batches_per_rank(per_rank, 1, {.dp_size = 1024}); },
                                   {"up to 1025 per rank", "1049600", "1048576", "max_token_len"}));
}

TEST(PackMicroBatches, TotalWorkloadOverflowNamesLengths) {
  const std::vector<int64_t> lengths = {int64_t{1} << 31, int64_t{1} << 31};
  EXPECT_TRUE(test::throws_invalid([&] { micro_batches(lengths, int64_t{1} << 40, {.workload = Workload::verl()}); },
                                   {"lengths", "verl", "overflows"}));
  const std::vector<std::span<const int64_t>> per_rank = {lengths};
  EXPECT_TRUE(
      test::throws_invalid([&] { micro_batches_per_rank(per_rank, int64_t{1} << 40, {.workload = Workload::verl()}); },
                           {"lengths[0]", "verl", "overflows"}));
}

}  // namespace
}  // namespace seqflow::pack
