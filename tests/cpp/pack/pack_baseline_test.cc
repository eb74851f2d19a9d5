#include <gtest/gtest.h>

#include <random>

#include "pack/xtuner_baseline.h"
#include "seqflow/error.h"
#include "test_support.h"

namespace seqflow::pack {
namespace {

TEST(PackXtunerBaseline, FollowsThePipelineAndPadsToTheCap) {
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int64_t> dist(100, 9000);
  std::vector<int64_t> lengths(256);
  for (auto& v : lengths) v = dist(rng);
  Plan plan = baseline::xtuner_pack(lengths, 8, 4, 16384);
  ASSERT_EQ(plan.packs.size(), 8u);
  std::vector<int> seen(lengths.size(), 0);
  for (const auto& rank : plan.packs) {
    ASSERT_EQ(rank.size(), 4u);
    for (size_t step = 0; step < 4; ++step) {
      EXPECT_EQ(rank[step].size(), plan.packs[0][step].size());
      int64_t samples = 0;
      for (const Pack& pack : rank[step]) {
        samples += static_cast<int64_t>(pack.samples.size());
        for (int64_t s : pack.samples) ++seen[s];
        EXPECT_EQ(pack.padded_length(), std::max<int64_t>(pack.tokens, 16384));
      }
      EXPECT_EQ(samples, 8);  // 256 / 8 ranks / 4 steps: equal-size splits
    }
  }
  for (int count : seen) EXPECT_EQ(count, 1);
}

TEST(PackXtunerBaseline, EverySampleOnceOnRandomInputs) {
  std::mt19937_64 rng(2);
  for (int64_t dp : {1, 2, 4, 8}) {
    for (int64_t steps : {1, 2, 4}) {
      for (int64_t per : {1, 3, 10}) {
        std::uniform_int_distribution<int64_t> dist(0, 5000);
        std::vector<int64_t> lengths(static_cast<size_t>(dp * steps * per));
        for (auto& v : lengths) v = dist(rng);
        Plan plan = baseline::xtuner_pack(lengths, dp, steps, 4096, 512);
        std::vector<int> seen(lengths.size(), 0);
        for (const auto& rank : plan.packs) {
          ASSERT_EQ(static_cast<int64_t>(rank.size()), steps);
          for (size_t step = 0; step < rank.size(); ++step) {
            EXPECT_EQ(rank[step].size(), plan.packs[0][step].size());
            for (const Pack& pack : rank[step]) {
              for (int64_t s : pack.samples) ++seen[s];
            }
          }
        }
        for (int count : seen) EXPECT_EQ(count, 1);
      }
    }
  }
}

TEST(PackXtunerBaseline, FailsWhereThePipelineAsserts) {
  std::vector<int64_t> lengths(10, 5);
  EXPECT_TRUE(test::throws_invalid([&] { baseline::xtuner_pack(lengths, 4, 1, 100); },
                                   {"10 samples do not split into dp_size = 4 equal parts"}));
  EXPECT_TRUE(test::throws_invalid([&] { baseline::xtuner_pack(lengths, 2, 3, 100); },
                                   {"rank 0's 5 samples do not split into optimizer_steps = 3 equal parts"}));
}

TEST(PackXtunerBaseline, DoesNotEnforceTheCap) {
  // Two ranks of {60, 60, 60}: ceil(180 / 100) = 2 packs, KK gives 120 + 60.
  std::vector<int64_t> lengths(6, 60);
  Plan plan = baseline::xtuner_pack(lengths, 2, 1, 100);
  EXPECT_GT(plan.stats.packs_over_cap, 0);
  EXPECT_EQ(plan.stats.max_pack_tokens, 120);
}

// Every parameter is named on its own, and sizes are checked before the plan
// is allocated (dp_size = 2^40 used to throw bad_alloc).
TEST(PackXtunerBaseline, BadInputIsNamedBeforeAllocating) {
  const std::vector<int64_t> lengths = {1, 2, 3, 4};
  const int64_t huge = int64_t{1} << 40;
  EXPECT_TRUE(test::throws_invalid([&] { baseline::xtuner_pack(lengths, huge, 1, 100); },
                                   {"dp_size x optimizer_steps", "1099511627776"}));
  EXPECT_TRUE(test::throws_invalid([&] { baseline::xtuner_pack(lengths, 1, huge, 100); },
                                   {"dp_size x optimizer_steps", "1099511627776"}));
  EXPECT_TRUE(test::throws_invalid([&] { baseline::xtuner_pack(lengths, 2, 1, 0); },
                                   {"pack_max_length must be positive, got 0"}));
  EXPECT_TRUE(test::throws_invalid([&] { baseline::xtuner_pack(lengths, 2, 1, huge); },
                                   {"pack_max_length", "1099511627776", "2147483647"}));
  EXPECT_TRUE(test::throws_invalid([&] { baseline::xtuner_pack(lengths, 2, 1, 100, -1); },
                                   {"pad_chunk must be positive, got -1"}));
  EXPECT_TRUE(test::throws_invalid(
      [&] {
        baseline::xtuner_pack(std::vector<int64_t>{1, -2}, 1, 1, 100);
      },
      {"lengths[1] = -2"}));
  // ceil(2^40 / 1) packs for one (rank, step).
  EXPECT_TRUE(test::throws_invalid([&] { baseline::xtuner_pack(std::vector<int64_t>{huge}, 1, 1, 1); },
                                   {"packs of rank 0, step 0", "1099511627776", "pack_max_length"}));
  // The tokens' total overflows: named as the baseline's lengths.
  EXPECT_TRUE(test::throws_invalid(
      [&] {
        baseline::xtuner_pack(std::vector<int64_t>{int64_t{1} << 62, int64_t{1} << 62}, 1, 1, 100);
      },
      {"lengths", "overflows"}));
}

}  // namespace
}  // namespace seqflow::pack
