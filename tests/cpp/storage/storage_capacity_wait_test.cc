// StorageUnit with when_full = wait under real threads: a put that does not
// fit waits, unlocked, until a clear makes room, then lands once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "seqflow/error.h"
#include "seqflow/storage.h"
#include "sample_keys_support.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPatience = std::chrono::seconds(30);  // every wait's deadline here

std::vector<Column> columns_of(std::span<const int64_t> gis) {
  std::vector<std::string> objects;
  for (const int64_t gi : gis) objects.push_back("value " + std::to_string(gi));
  return {object_column("x", objects)};
}

// Waits (deadline kPatience) until `done()`.
bool until(const std::function<bool()>& done) {
  const auto deadline = Clock::now() + kPatience;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Waits (deadline kPatience) until `unit` has `waiting` puts waiting.
bool until_waiting(const StorageUnit& unit, uint64_t waiting) {
  return until([&] { return unit.capacity_stats().waiting_puts == waiting; });
}

bool is_ready(const std::future<void>& put) {
  return put.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready;
}

TEST(StorageCapacityWait, APutWaitsUntilAClearMakesRoomAndLandsOnce) {
  StorageUnit unit({.max_samples = 4, .when_full = WhenFull::kWait, .wait_timeout = kPatience});
  const std::vector<int64_t> first = index_range(0, 4);
  unit.put(samples_of(first), columns_of(first));
  const std::vector<int64_t> more = index_range(4, 6);
  auto waiting = std::async(std::launch::async, [&] { unit.put(samples_of(more), columns_of(more)); });
  ASSERT_TRUE(until_waiting(unit, 1));
  // Reads go on while the put waits: it holds no lock.
  EXPECT_EQ(unit.get(samples_of(first), std::vector<std::string>{"x"}).size(), 4u);
  EXPECT_EQ(unit.stats().samples, 4u);
  unit.clear(index_range(0, 2));
  ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
  waiting.get();  // rethrows a failure
  EXPECT_EQ(unit.stats().samples, 4u);
  const auto rows = unit.get(samples_of(more), std::vector<std::string>{"x"});
  ASSERT_EQ(rows.size(), 2u);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(text_of(rows[i][0]), "value " + std::to_string(more[i]));
  const CapacityStats stats = unit.capacity_stats();
  EXPECT_EQ(stats.puts_waited, 1u);
  EXPECT_EQ(stats.puts_refused, 0u);
  EXPECT_EQ(stats.waiting_puts, 0u);
}

TEST(StorageCapacityWait, WaitingPutsResumeAtTheLowWatermark) {
  StorageUnit unit({.max_samples = 10,
                    .when_full = WhenFull::kWait,
                    .high_watermark = 1.0,
                    .low_watermark = 0.5,
                    .wait_timeout = kPatience});
  const std::vector<int64_t> full = index_range(0, 10);
  unit.put(samples_of(full), columns_of(full));
  const std::vector<int64_t> more = index_range(10, 12);
  auto waiting = std::async(std::launch::async, [&] { unit.put(samples_of(more), columns_of(more)); });
  ASSERT_TRUE(until_waiting(unit, 1));
  const uint64_t answered = unit.capacity_stats().full_answers;
  unit.clear(index_range(0, 3));  // 7 held: room for 2, but above the low watermark
  // The clear wakes the put, which checks again: it must find the limit
  // still closed (a new "no room" answer) and go on waiting.
  ASSERT_TRUE(until([&] { return unit.capacity_stats().full_answers > answered || is_ready(waiting); }));
  EXPECT_FALSE(is_ready(waiting)) << "the put resumed above the low watermark";
  EXPECT_EQ(unit.stats().samples, 7u);
  unit.clear(index_range(3, 5));  // 5 held: the low watermark
  ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
  waiting.get();
  EXPECT_EQ(unit.stats().samples, 7u);
}

// Waiting puts are served in order: a small put that arrives while a big
// one waits queues behind it instead of taking the room it waits for.
TEST(StorageCapacityWait, ABigWaitingPutIsNotStarvedBySmallOnes) {
  StorageUnit unit({.max_samples = 4, .when_full = WhenFull::kWait, .wait_timeout = kPatience});
  const std::vector<int64_t> full = index_range(0, 4);
  unit.put(samples_of(full), columns_of(full));
  const std::vector<int64_t> big = index_range(10, 13);
  auto big_put = std::async(std::launch::async, [&] { unit.put(samples_of(big), columns_of(big)); });
  ASSERT_TRUE(until_waiting(unit, 1));
  // Each clear frees the room of one sample, and a small put arrives for it.
  std::vector<std::future<void>> small_puts;
  for (int64_t k = 0; k < 2; ++k) {
    unit.clear(index_range(k, k + 1));
    small_puts.push_back(std::async(std::launch::async, [&unit, k] {
      const std::vector<int64_t> one = index_range(20 + k, 21 + k);
      unit.put(samples_of(one), columns_of(one));
    }));
    const uint64_t waiting = static_cast<uint64_t>(k) + 2;
    ASSERT_TRUE(until([&] { return unit.capacity_stats().waiting_puts == waiting || is_ready(small_puts.back()); }));
    EXPECT_FALSE(is_ready(small_puts.back())) << "small put " << k << " took the room the big one waits for";
  }
  EXPECT_EQ(unit.stats().samples, 2u);
  unit.clear(index_range(2, 3));  // room for the big put, first in line
  ASSERT_EQ(big_put.wait_for(kPatience), std::future_status::ready);
  big_put.get();
  EXPECT_TRUE(until_waiting(unit, 2));  // the small ones wait on: 4 held
  unit.clear(std::vector<int64_t>{3, 10});
  for (auto& small_put : small_puts) {
    ASSERT_EQ(small_put.wait_for(kPatience), std::future_status::ready);
    small_put.get();
  }
  const std::vector<int64_t> held = {11, 12, 20, 21};
  const auto rows = unit.get(samples_of(held), std::vector<std::string>{"x"});
  for (size_t i = 0; i < held.size(); ++i) EXPECT_EQ(text_of(rows[i][0]), "value " + std::to_string(held[i]));
  EXPECT_EQ(unit.stats().samples, 4u);
}

TEST(StorageCapacityWait, ManyWaitingProducersLoseAndDuplicateNothing) {
  constexpr int kProducers = 4;
  constexpr int64_t kPuts = 25;
  constexpr int64_t kBatch = 2;
  StorageUnit unit({.max_samples = 8, .when_full = WhenFull::kWait, .wait_timeout = kPatience});
  std::vector<std::future<void>> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.push_back(std::async(std::launch::async, [&unit, p] {
      for (int64_t i = 0; i < kPuts; ++i) {
        const std::vector<int64_t> gis = index_range((p * kPuts + i) * kBatch, (p * kPuts + i + 1) * kBatch);
        unit.put(samples_of(gis), columns_of(gis));
      }
    }));
  }
  // The consumer reads each sample once, checks it, and clears it.
  constexpr int64_t kTotal = kProducers * kPuts * kBatch;
  std::vector<int> seen(kTotal, 0);
  int64_t consumed = 0;
  const auto deadline = Clock::now() + kPatience;
  while (consumed < kTotal && Clock::now() < deadline) {
    bool progressed = false;
    for (int64_t gi = 0; gi < kTotal; ++gi) {
      if (seen[gi] != 0) continue;
      const int64_t one[] = {gi};
      try {
        const auto rows = unit.get(samples_of(one), std::vector<std::string>{"x"});
        EXPECT_EQ(text_of(rows[0][0]), "value " + std::to_string(gi));
      } catch (const Error&) {
        continue;  // not put yet
      }
      ++seen[gi];
      ++consumed;
      unit.clear(one);
      progressed = true;
    }
    if (!progressed) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (auto& producer : producers) {
    ASSERT_EQ(producer.wait_for(kPatience), std::future_status::ready);
    producer.get();
  }
  EXPECT_EQ(consumed, kTotal);
  for (int64_t gi = 0; gi < kTotal; ++gi) EXPECT_EQ(seen[gi], 1) << gi;
  EXPECT_EQ(unit.stats().samples, 0u);
  EXPECT_EQ(unit.capacity_stats().puts_refused, 0u);
}

}  // namespace
}  // namespace seqflow::test
