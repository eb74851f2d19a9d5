// Large copies split between threads: every byte lands once where it
// belongs, parts cut pairs on their boundaries, and a part's error is told.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <mutex>
#include <new>
#include <set>
#include <thread>
#include <vector>

#include "common/split_copy.h"

namespace seqflow {
namespace {

// Pairs of unequal sizes (some empty) over one source and one destination,
// the destination filled in another order than the source's.
struct Pairs {
  std::vector<std::byte> source, destination;
  std::vector<iovec> to, from;

  explicit Pairs(size_t count) {
    size_t total = 0;
    std::vector<size_t> sizes;
    for (size_t i = 0; i < count; ++i) total += sizes.emplace_back((i * 7919) % 5000);
    source.resize(total);
    destination.assign(total, std::byte{0});
    for (size_t i = 0; i < total; ++i) source[i] = static_cast<std::byte>(i * 31 + 7);
    size_t at_source = 0, at_destination = total;
    for (const size_t size : sizes) {
      at_destination -= size;  // the last pair lands first
      to.push_back({destination.data() + at_destination, size});
      from.push_back({source.data() + at_source, size});
      at_source += size;
    }
  }

  bool landed() const {
    for (size_t i = 0; i < to.size(); ++i) {
      const auto* into = static_cast<const std::byte*>(to[i].iov_base);
      const auto* out_of = static_cast<const std::byte*>(from[i].iov_base);
      if (!std::equal(into, into + to[i].iov_len, out_of)) return false;
    }
    return true;
  }
};

size_t cores() { return std::max(1u, std::thread::hardware_concurrency()); }

TEST(SplitCopyConcurrency, EveryByteLandsWhereItsPairSays) {
  Pairs pairs(400);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  size_t parts = 0, bytes = 0;
  const auto copy = [&](const std::vector<iovec>& to, const std::vector<iovec>& from) {
    {
      std::lock_guard lock(mutex);
      threads.insert(std::this_thread::get_id());
      ++parts;
      for (const iovec& entry : to) bytes += entry.iov_len;
    }
    return copy_in_memory(to, from);
  };
  EXPECT_EQ(copy_split(pairs.to, pairs.from, pairs.source.size() / 16, 4, copy), 0);
  EXPECT_TRUE(pairs.landed());
  EXPECT_EQ(bytes, pairs.source.size());  // a cut pair's bytes once, in one part or the other
  EXPECT_EQ(parts, std::min<size_t>(4, cores()));
  EXPECT_EQ(threads.size(), parts);
}

TEST(SplitCopyConcurrency, SmallCopiesStayOnTheCallingThread) {
  Pairs pairs(50);
  std::atomic<size_t> parts{0};
  std::thread::id ran_on;
  const auto copy = [&](const std::vector<iovec>& to, const std::vector<iovec>& from) {
    ++parts;
    ran_on = std::this_thread::get_id();
    return copy_in_memory(to, from);
  };
  // Under twice a thread's share: one part.
  EXPECT_EQ(copy_split(pairs.to, pairs.from, pairs.source.size() / 2 + 1, 4, copy), 0);
  EXPECT_TRUE(pairs.landed());
  EXPECT_EQ(parts.load(), 1u);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(SplitCopyConcurrency, APartsErrorIsReturned) {
  Pairs pairs(400);
  std::atomic<size_t> calls{0};
  const auto copy = [&](const std::vector<iovec>& to, const std::vector<iovec>& from) {
    // The part holding the last pair's bytes fails, whichever thread runs it.
    const auto* last = static_cast<const std::byte*>(pairs.to.back().iov_base);
    ++calls;
    for (const iovec& entry : to) {
      if (entry.iov_base == last) return EFAULT;
    }
    return copy_in_memory(to, from);
  };
  EXPECT_EQ(copy_split(pairs.to, pairs.from, pairs.source.size() / 8, 2, copy), EFAULT);
  EXPECT_EQ(calls.load(), std::min<size_t>(2, cores()));
}

TEST(SplitCopyConcurrency, APartsExceptionIsRethrownOnceEveryPartEnded) {
  Pairs pairs(400);
  std::atomic<size_t> ended{0};
  const auto copy = [&](const std::vector<iovec>& to, const std::vector<iovec>& from) {
    const auto* last = static_cast<const std::byte*>(pairs.to.back().iov_base);
    for (const iovec& entry : to) {
      if (entry.iov_base == last) {
        ++ended;
        throw std::bad_alloc();
      }
    }
    const int result = copy_in_memory(to, from);
    ++ended;
    return result;
  };
  EXPECT_THROW(copy_split(pairs.to, pairs.from, pairs.source.size() / 8, 2, copy), std::bad_alloc);
  EXPECT_EQ(ended.load(), std::min<size_t>(2, cores()));  // no part still running
}

TEST(SplitCopyConcurrency, NothingToCopyIsOnePart) {
  std::vector<iovec> none;
  size_t parts = 0;
  const auto copy = [&](const std::vector<iovec>& to, const std::vector<iovec>&) {
    ++parts;
    return to.empty() ? 0 : EINVAL;
  };
  EXPECT_EQ(copy_split(none, none, 1, 4, copy), 0);
  EXPECT_EQ(parts, 1u);
}

}  // namespace
}  // namespace seqflow
