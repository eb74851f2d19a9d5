// The large-block allocator: freed blocks come back for requests of their
// size (not much smaller ones), the cache stays under its limit dropping
// the blocks freed longest ago, and a zero limit or a bad setting caches
// nothing. Threads sharing it: block_cache_concurrency_test.cc.
#include "common/block_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <set>
#include <vector>

#include "block_cache_test_support.h"

namespace seqflow {
namespace {

using test::kMiB;

TEST(BlockCache, AFreedBlockServesTheNextRequestOfItsSize) {
  BlockCache cache(64 * kMiB);
  size_t capacity = 0;
  std::byte* block = cache.acquire(3 * kMiB, &capacity);
  EXPECT_EQ(capacity, 3 * kMiB);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % BlockCache::kAlignment, 0u);  // for huge pages
  std::memset(block, 7, 3 * kMiB);
  cache.release(block, capacity);
  EXPECT_EQ(cache.cached_bytes(), 3 * kMiB);
  size_t again = 0;
  EXPECT_EQ(cache.acquire(3 * kMiB - 5, &again), block);
  EXPECT_EQ(again, 3 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 0u);
  cache.release(block, again);
}

TEST(BlockCache, BlocksWasteAtMostAnEighthAndThoseUnder2MiBArePageAligned) {
  EXPECT_EQ(BlockCache::capacity_for(1), 4096u);                      // a page at least
  EXPECT_EQ(BlockCache::capacity_for(300 << 10), size_t{320} << 10);  // eighths of 256 KiB
  EXPECT_EQ(BlockCache::capacity_for(512 << 10), size_t{512} << 10);
  EXPECT_EQ(BlockCache::capacity_for((512 << 10) + 1), size_t{576} << 10);
  EXPECT_EQ(BlockCache::capacity_for(2 * kMiB - 1), 2 * kMiB);
  // ZeroMQ's block for a 2 MiB frame: the frame and its header, an eighth more, not two huge pages.
  EXPECT_EQ(BlockCache::capacity_for(2 * kMiB + 64), 2 * kMiB + (256 << 10));
  EXPECT_EQ(BlockCache::capacity_for(16 * kMiB + 1), 18 * kMiB);   // from 16 MiB on, whole huge pages
  EXPECT_EQ(BlockCache::capacity_for(64 * kMiB + 64), 66 * kMiB);  // not an eighth of 64 MiB more
  for (size_t size = 1; size < 256 * kMiB; size = size * 3 / 2 + 1) {
    const size_t capacity = BlockCache::capacity_for(size);
    EXPECT_GE(capacity, size);
    if (size >= 32 << 10) {
      EXPECT_LE(capacity - size, size / 8) << size;
    }
  }
  BlockCache cache(64 * kMiB);
  size_t capacity = 0;
  std::byte* block = cache.acquire(300 << 10, &capacity);
  EXPECT_EQ(capacity, size_t{320} << 10);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % BlockCache::kPageAlignment, 0u);
  std::memset(block, 7, capacity);
  cache.release(block, capacity);
  size_t again = 0;
  EXPECT_EQ(cache.acquire(290 << 10, &again), block) << "a request of its size class finds it";
  cache.release(block, again);
  EXPECT_EQ(cache.cached_bytes(), size_t{320} << 10);
  // A smaller class does not take it: a kept message's block stays within an eighth of its size.
  size_t smaller = 0;
  std::byte* other = cache.acquire(256 << 10, &smaller);
  EXPECT_NE(other, block);
  EXPECT_EQ(smaller, size_t{256} << 10);
  cache.release(other, smaller);
}

TEST(BlockCache, ABlockMoreThanAQuarterLargerIsNotHandedOut) {
  BlockCache cache(64 * kMiB);
  size_t capacity = 0;
  std::byte* eight = cache.acquire(8 * kMiB, &capacity);
  cache.release(eight, capacity);
  size_t small_capacity = 0;
  std::byte* four = cache.acquire(4 * kMiB, &small_capacity);
  EXPECT_NE(four, eight);
  EXPECT_EQ(small_capacity, 4 * kMiB);
  size_t seven_capacity = 0;
  EXPECT_EQ(cache.acquire(7 * kMiB, &seven_capacity), eight);
  EXPECT_EQ(seven_capacity, 8 * kMiB);
  cache.release(four, small_capacity);
  cache.release(eight, seven_capacity);
}

TEST(BlockCache, StaysUnderItsLimitDroppingTheBlocksFreedLongestAgo) {
  BlockCache cache(10 * kMiB);
  std::vector<std::byte*> blocks;
  for (int i = 0; i < 3; ++i) {
    size_t capacity = 0;
    blocks.push_back(cache.acquire(4 * kMiB, &capacity));
  }
  for (std::byte* block : blocks) cache.release(block, 4 * kMiB);
  EXPECT_EQ(cache.cached_bytes(), 8 * kMiB);  // the first one freed was dropped
  std::set<std::byte*> reused;
  for (int i = 0; i < 2; ++i) {
    size_t capacity = 0;
    reused.insert(cache.acquire(4 * kMiB, &capacity));
  }
  EXPECT_EQ(reused, (std::set<std::byte*>{blocks[1], blocks[2]}));
  for (std::byte* block : reused) cache.release(block, 4 * kMiB);
  size_t capacity = 0;
  std::byte* too_big = cache.acquire(12 * kMiB, &capacity);
  cache.release(too_big, capacity);  // larger than the limit: freed, the others stay
  EXPECT_EQ(cache.cached_bytes(), 8 * kMiB);
}

TEST(BlockCache, ASizeTooLargeToRoundUpThrowsBadAllocInsteadOfATinyBlock) {
  BlockCache cache(64 * kMiB);
  size_t capacity = 0;
  EXPECT_THROW(cache.acquire(SIZE_MAX, &capacity), std::bad_alloc);
  EXPECT_THROW(cache.acquire(SIZE_MAX - BlockCache::kAlignment + 2, &capacity), std::bad_alloc);
  EXPECT_EQ(capacity, 0u);
}

TEST(BlockCache, AZeroLimitCachesNothing) {
  BlockCache cache(0);
  size_t capacity = 0;
  std::byte* block = cache.acquire(2 * kMiB, &capacity);
  cache.release(block, capacity);
  EXPECT_EQ(cache.cached_bytes(), 0u);
}

TEST(BlockCache, TheLimitSettingIsReadAsMiBAndABadOneTurnsTheCacheOff) {
  EXPECT_EQ(BlockCache::limit_from(nullptr), 2048 * kMiB);
  EXPECT_EQ(BlockCache::limit_from(""), 2048 * kMiB);
  EXPECT_EQ(BlockCache::limit_from("512"), 512 * kMiB);
  EXPECT_EQ(BlockCache::limit_from("0"), 0u);
  for (const char* bad : {"-1", "1e3", "64MB", " 64", "99999999999999999999"}) {
    EXPECT_EQ(BlockCache::limit_from(bad), 0u) << bad;
  }
}

}  // namespace
}  // namespace seqflow
