#include "common/amortized_reserve.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace seqflow {
namespace {

// Inserts of a few samples at a time (puts of 16 into one partition) must
// reallocate the partition's columns O(log n) times, not on every insert.
TEST(AmortizedReserve, ManySmallGrowthsReallocateLogarithmicallyOften) {
  std::vector<int64_t> column;
  int reallocations = 0;
  for (size_t size = 16; size <= 16 * 10'000; size += 16) {
    const size_t before = column.capacity();
    amortized_reserve(column, size);
    reallocations += column.capacity() != before ? 1 : 0;
    ASSERT_GE(column.capacity(), size);
  }
  EXPECT_LE(reallocations, 20);
}

TEST(AmortizedReserve, ALargeRequestGetsAtLeastWhatItAsks) {
  std::vector<int64_t> column(10);
  amortized_reserve(column, 1'000'000);
  EXPECT_GE(column.capacity(), 1'000'000u);
  EXPECT_EQ(column.size(), 10u);  // room only: the elements stay as they were
  const size_t capacity = column.capacity();
  amortized_reserve(column, 500);  // already room: nothing changes
  EXPECT_EQ(column.capacity(), capacity);
}

}  // namespace
}  // namespace seqflow
