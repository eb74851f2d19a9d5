// The large-block allocator shared by threads: no two threads ever hold the
// same block at once, and the cache stays under its limit.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "block_cache_test_support.h"
#include "common/block_cache.h"

namespace seqflow {
namespace {

using test::kMiB;

TEST(BlockCacheConcurrency, ThreadsNeverHoldTheSameBlockAtOnce) {
  BlockCache cache(32 * kMiB);
  std::atomic<int> clashes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 200; ++i) {
        const size_t size = (2 + rng() % 4) * kMiB;
        size_t capacity = 0;
        std::byte* block = cache.acquire(size, &capacity);
        const auto mark = static_cast<std::byte>(t + 1);
        block[0] = mark;
        block[size - 1] = mark;
        std::this_thread::yield();
        if (block[0] != mark || block[size - 1] != mark) ++clashes;
        cache.release(block, capacity);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(clashes.load(), 0);
  EXPECT_LE(cache.cached_bytes(), cache.limit());
}

}  // namespace
}  // namespace seqflow
