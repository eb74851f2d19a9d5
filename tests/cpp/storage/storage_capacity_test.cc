// StorageUnit's capacity: per-partition limits, watermarks and their
// hysteresis, when_full without waiting (try_put), bad options.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "seqflow/error.h"
#include "seqflow/storage.h"
#include "sample_keys_support.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

std::vector<int64_t> range(int64_t begin, int64_t end) {
  std::vector<int64_t> out;
  for (int64_t gi = begin; gi < end; ++gi) out.push_back(gi);
  return out;
}

Column values(size_t samples) { return object_column("x", std::vector<std::string>(samples, "v")); }

void put(StorageUnit& unit, int64_t begin, int64_t end, const std::string& partition = kTestPartition) {
  const std::vector<int64_t> gis = range(begin, end);
  unit.put(samples_of(gis, 1, partition), {values(gis.size())});
}

::testing::AssertionResult put_refused(StorageUnit& unit, int64_t begin, int64_t end, const std::string& partition,
                                       std::vector<std::string> fragments) {
  fragments.insert(fragments.begin(), "storage full");
  return throws_error(
      ErrorCode::kInvalidArgument, [&] { put(unit, begin, end, partition); }, fragments);
}

TEST(StorageCapacity, PerPartitionSampleLimitCountsEachPartitionApart) {
  StorageUnit unit({.max_samples_per_partition = 3});
  put(unit, 0, 3, "a");
  put(unit, 3, 6, "b");  // another partition has its own room
  EXPECT_TRUE(put_refused(unit, 6, 7, "a",
                          {"max_samples_per_partition is 3 for partition 'a'", "needs 1 new samples", "0 are free"}));
  EXPECT_EQ(unit.stats().samples, 6u);
  unit.clear(range(0, 2));
  put(unit, 6, 8, "a");
  const auto usage = unit.partition_usage();
  ASSERT_EQ(usage.size(), 2u);
  for (const auto& partition : usage) EXPECT_EQ(partition.samples, 3u) << partition.partition;
}

TEST(StorageCapacity, PerPartitionByteLimitReleasesWhatAnOverwriteReplaces) {
  constexpr uint64_t kOne = kSampleOverheadBytes + kValueOverheadBytes;
  StorageUnit unit({.max_bytes_per_partition = 2 * kOne + 10});
  unit.put(samples_of(range(0, 2), 1, "a"), {object_column("x", {"aaaa", "bb"})});
  EXPECT_TRUE(put_refused(unit, 2, 3, "a", {"max_bytes_per_partition", "for partition 'a'"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] { unit.put(samples_of(range(0, 1), 1, "a"), {object_column("x", {"123456789"})}); },
                           {"max_bytes_per_partition", "needs 9 bytes", "8 are free"}));
  unit.put(samples_of(range(0, 1), 1, "a"), {object_column("x", {"12345678"})});
  ASSERT_EQ(unit.partition_usage().size(), 1u);
  EXPECT_EQ(unit.partition_usage()[0].bytes, 2 * kOne + 10);
  EXPECT_EQ(unit.partition_usage()[0].bytes, unit.stats().bytes + unit.stats().overhead_bytes);
}

TEST(StorageCapacity, PartitionUsageFollowsCommitsDiscardsAndClears) {
  StorageUnit unit({.max_samples_per_partition = 10});
  put(unit, 0, 4, "a");
  TestSamples staged = samples_of(range(0, 2), 1, "a");
  SampleKeys keys = staged;
  keys.write_version = 7;
  unit.put(keys, {object_column("x", {"new", "new"})});
  const std::string fields[] = {"x"};
  unit.commit(keys, fields);
  const auto total = [&] { return unit.stats().bytes + unit.stats().overhead_bytes; };
  ASSERT_EQ(unit.partition_usage().size(), 1u);
  EXPECT_EQ(unit.partition_usage()[0].bytes, total());
  keys.write_version = 8;
  unit.put(keys, {object_column("x", {"staged", "staged"})});
  unit.discard(keys, fields);
  EXPECT_EQ(unit.partition_usage()[0].bytes, total());
  EXPECT_EQ(unit.partition_usage()[0].samples, 4u);
  unit.clear(range(0, 4));
  EXPECT_TRUE(unit.partition_usage().empty());
}

TEST(StorageCapacity, HighWatermarkCapsEachLimit) {
  StorageUnit unit({.max_samples = 10, .high_watermark = 0.8});
  put(unit, 0, 8);
  EXPECT_TRUE(put_refused(unit, 8, 9, kTestPartition, {"max_samples is 10 (high watermark 0.8: 8)", "0 are free"}));
  EXPECT_EQ(unit.stats().samples, 8u);
}

TEST(StorageCapacity, LowWatermarkHoldsPutsUntilUsageFallsToIt) {
  StorageUnit unit({.max_samples = 10, .high_watermark = 0.8, .low_watermark = 0.5});
  put(unit, 0, 8);
  EXPECT_TRUE(put_refused(unit, 8, 9, kTestPartition, {"high watermark 0.8"}));
  unit.clear(range(0, 2));  // 6 held: room for 2, but the limit filled and waits for 5
  EXPECT_TRUE(put_refused(unit, 8, 9, kTestPartition,
                          {"filled up", "low watermark 0.5 (5)", "usage is 6", "needs 1 new samples"}));
  unit.clear(range(2, 3));  // 5 held: open again
  put(unit, 8, 11);
  EXPECT_EQ(unit.stats().samples, 8u);
}

TEST(StorageCapacity, HysteresisAppliesPerPartition) {
  StorageUnit unit({.max_samples_per_partition = 4, .high_watermark = 1.0, .low_watermark = 0.5});
  put(unit, 0, 4, "a");
  EXPECT_TRUE(put_refused(unit, 4, 5, "a", {"for partition 'a'"}));
  put(unit, 10, 12, "b");  // b never filled
  unit.clear(range(0, 1));
  EXPECT_TRUE(put_refused(unit, 4, 5, "a", {"for partition 'a'", "filled up", "usage is 3"}));
  unit.clear(range(1, 2));
  put(unit, 4, 6, "a");
}

TEST(StorageCapacity, APutLargerThanTheLimitNeverWaits) {
  StorageUnit unit({.max_samples = 4, .when_full = WhenFull::kWait, .wait_timeout = std::chrono::minutes(10)});
  const auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(put_refused(unit, 0, 5, kTestPartition, {"max_samples is 4", "needs 5 new samples", "never fits"}));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::minutes(5));  // a generous cap
  EXPECT_EQ(unit.capacity_stats().puts_refused, 1u);
  EXPECT_EQ(unit.capacity_stats().puts_waited, 0u);
}

TEST(StorageCapacity, TryPutAnswersFullInsteadOfWaiting) {
  StorageUnit unit({.max_samples = 2, .when_full = WhenFull::kWait});
  const std::vector<int64_t> first = range(0, 2);
  EXPECT_FALSE(unit.try_put(samples_of(first), {values(2)}).has_value());
  const std::vector<int64_t> more = range(2, 3);
  const std::optional<std::string> full = unit.try_put(samples_of(more), {values(1)});
  ASSERT_TRUE(full.has_value());
  EXPECT_NE(full->find("storage full: max_samples is 2"), std::string::npos) << *full;
  EXPECT_EQ(unit.stats().samples, 2u);
  EXPECT_EQ(unit.capacity_stats().puts_waited, 1u);
  unit.clear(range(0, 1));
  EXPECT_FALSE(unit.try_put(samples_of(more), {values(1)}).has_value());
  EXPECT_EQ(unit.get(samples_of(more), std::vector<std::string>{"x"}).size(), 1u);
}

std::optional<std::string> try_put(StorageUnit& unit, int64_t begin, int64_t end) {
  const std::vector<int64_t> gis = range(begin, end);
  return unit.try_put(samples_of(gis), {values(gis.size())});
}

// A service's waiting puts are served in order too: a put answered "full"
// holds its place while its client retries, so that a smaller later put
// does not take the room it waits for.
TEST(StorageCapacity, ARetriedPutKeepsItsPlaceInLine) {
  StorageUnit unit({.max_samples = 4, .when_full = WhenFull::kWait});
  ASSERT_FALSE(try_put(unit, 0, 4).has_value());
  ASSERT_TRUE(try_put(unit, 10, 13).has_value());  // the big put: 3 samples
  unit.clear(range(0, 1));                         // room for one
  const std::optional<std::string> small = try_put(unit, 20, 21);
  ASSERT_TRUE(small.has_value()) << "the small put took the room the big one waits for";
  EXPECT_NE(small->find("1 are free and earlier waiting puts need 3 first"), std::string::npos) << *small;
  unit.clear(range(1, 3));  // room for the big put
  EXPECT_FALSE(try_put(unit, 10, 13).has_value());
  EXPECT_TRUE(try_put(unit, 20, 21).has_value());  // 4 held
  unit.clear(range(3, 4));
  EXPECT_FALSE(try_put(unit, 20, 21).has_value());
  EXPECT_EQ(unit.stats().samples, 4u);
  EXPECT_EQ(unit.capacity_stats().waiting_puts, 0u);
}

// A client that stops asking (gone, or past its budget) loses its place:
// the puts behind it get the room.
TEST(StorageCapacity, APlaceInLineLapsesWhenItsClientStopsAsking) {
  StorageUnit unit({.max_samples = 2, .when_full = WhenFull::kWait});
  ASSERT_FALSE(try_put(unit, 0, 2).has_value());
  ASSERT_TRUE(try_put(unit, 10, 12).has_value());  // never asked again
  unit.clear(range(0, 1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool landed = false;
  while (!landed && std::chrono::steady_clock::now() < deadline) {
    landed = !try_put(unit, 20, 21).has_value();
    if (!landed) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // as a client backs off
  }
  EXPECT_TRUE(landed);
  EXPECT_EQ(unit.stats().samples, 2u);
  EXPECT_EQ(unit.capacity_stats().waiting_puts, 0u);
}

TEST(StorageCapacity, TryPutInRaiseModeRaisesAsPut) {
  StorageUnit unit({.max_samples = 1});
  const std::vector<int64_t> gis = range(0, 2);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.try_put(samples_of(gis), {values(2)}); },
                           {"storage full: max_samples is 1"}));
  EXPECT_EQ(unit.capacity_stats().puts_refused, 1u);
}

TEST(StorageCapacity, WaitModeWithoutRoomRaisesAtItsTimeoutSayingItWaited) {
  StorageUnit unit({.max_samples = 1, .when_full = WhenFull::kWait, .wait_timeout = std::chrono::milliseconds(20)});
  put(unit, 0, 1);
  EXPECT_TRUE(put_refused(unit, 1, 2, kTestPartition, {"max_samples is 1", "the put waited", "wait_timeout 20 ms"}));
  EXPECT_EQ(unit.stats().samples, 1u);
  const CapacityStats stats = unit.capacity_stats();
  EXPECT_EQ(stats.puts_waited, 1u);
  EXPECT_EQ(stats.puts_refused, 1u);
  EXPECT_EQ(stats.waiting_puts, 0u);
}

// A checkpoint replaces the content, so each of its partitions must fit
// its limit as a whole; one that does not loads nothing.
TEST(StorageCapacity, ALoadChecksEachPartitionsLimitAndLoadsNothingPastIt) {
  TempDir dir;
  const std::string path = dir.file("checkpoint");
  StorageUnit source;
  put(source, 0, 2, "a");
  put(source, 2, 5, "b");
  source.save(path);
  struct Case {
    StorageOptions options;
    std::vector<std::string> fragments;
  };
  StorageUnit measured({.max_bytes_per_partition = uint64_t{1} << 40});
  measured.load(path);
  uint64_t b_bytes = 0;
  for (const auto& usage : measured.partition_usage()) {
    if (usage.partition == "b") b_bytes = usage.bytes;
  }
  ASSERT_GT(b_bytes, 0u);
  const Case cases[] = {
      {{.max_samples_per_partition = 2}, {"max_samples_per_partition is 2 for partition 'b'", "holds 3 samples"}},
      {{.max_bytes_per_partition = b_bytes - 1},
       {"max_bytes_per_partition is " + std::to_string(b_bytes - 1) + " for partition 'b'",
        "holds " + std::to_string(b_bytes) + " bytes"}},
  };
  for (const Case& c : cases) {
    StorageUnit unit(c.options);
    put(unit, 7, 8, "c");
    std::vector<std::string> fragments = c.fragments;
    fragments.insert(fragments.begin(), {"storage full", path, "nothing was loaded"});
    EXPECT_TRUE(throws_error(
        ErrorCode::kInvalidArgument, [&] { unit.load(path); }, fragments));
    EXPECT_EQ(unit.stats().samples, 1u);  // as it was
    const auto usage = unit.partition_usage();
    ASSERT_EQ(usage.size(), 1u);
    EXPECT_EQ(usage[0].partition, "c");
  }
  StorageUnit fits({.max_samples_per_partition = 3});
  fits.load(path);
  EXPECT_EQ(fits.stats().samples, 5u);
}

TEST(StorageCapacity, BadOptionsNameTheOptionAndValue) {
  struct Case {
    StorageOptions options;
    std::vector<std::string> fragments;
  };
  const Case cases[] = {
      {{.high_watermark = 0.0}, {"high_watermark must be in (0, 1]", "got 0"}},
      {{.high_watermark = 1.5}, {"high_watermark", "got 1.5"}},
      {{.low_watermark = -0.25}, {"low_watermark must be in (0, 1]", "got -0.25"}},
      {{.high_watermark = 0.5, .low_watermark = 0.75}, {"low_watermark must not exceed high_watermark (0.5)", "0.75"}},
      {{.wait_timeout = std::chrono::milliseconds(-1)}, {"wait_timeout", "got -1"}},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(throws_error(
        ErrorCode::kInvalidArgument, [&] { StorageUnit unit(c.options); }, c.fragments));
    EXPECT_TRUE(throws_error(
        ErrorCode::kInvalidArgument, [&] { check_storage_options(c.options); }, c.fragments));
  }
}

}  // namespace
}  // namespace seqflow::test
