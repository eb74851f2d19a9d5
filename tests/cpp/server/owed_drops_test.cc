// Owed drops: one entry per index, the highest generation released there,
// however many clears pass while a unit is away.
#include <gtest/gtest.h>

#include <vector>

#include "server/owed_drops.h"
#include "test_support.h"

namespace seqflow::server {
namespace {

TEST(OwedDrops, AnIndexReleasedAgainAndAgainIsOwedOnceAtItsHighestGeneration) {
  OwedDrops owed;
  for (uint64_t generation = 1; generation <= 1000; ++generation) {
    const std::vector<int64_t> indexes = {3, 7};
    const std::vector<uint64_t> generations = {generation, 2 * generation};
    owed.add("unit0", indexes, generations);
  }
  owed.add("unit1", std::vector<int64_t>{3}, std::vector<uint64_t>{5});
  EXPECT_EQ(owed.size(), 3u);

  const OwedDrops::Debt debt = owed.take("unit0");
  EXPECT_EQ(debt.indexes, (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(debt.generations, (std::vector<uint64_t>{1000, 2000}));
  EXPECT_EQ(owed.size(), 1u);
  EXPECT_TRUE(owed.take("unit0").indexes.empty());

  // Given back after a failed send, below a newer release: the newer stays.
  owed.add("unit1", std::vector<int64_t>{3}, std::vector<uint64_t>{9});
  owed.add("unit1", std::vector<int64_t>{3}, std::vector<uint64_t>{5});
  EXPECT_EQ(owed.take("unit1").generations, (std::vector<uint64_t>{9}));
}

TEST(OwedDrops, ARestartedUnitOwesNothing) {
  OwedDrops owed;
  owed.add("unit0", std::vector<int64_t>{1, 2}, std::vector<uint64_t>{4, 4});
  owed.forget("unit0");
  EXPECT_EQ(owed.size(), 0u);
  EXPECT_TRUE(owed.take("unit0").indexes.empty());
}

TEST(OwedDrops, GenerationsMustMatchIndexes) {
  OwedDrops owed;
  EXPECT_TRUE(test::throws_invalid(
      [&] {
        owed.add("unit0", std::vector<int64_t>{1, 2}, std::vector<uint64_t>{4});
      },
      {"1 generations for 2 global indexes"}));
  EXPECT_EQ(owed.size(), 0u);
}

}  // namespace
}  // namespace seqflow::server
