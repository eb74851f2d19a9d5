// StorageUnit's capacity: per-partition limits, watermarks and their
// hysteresis, when_full without waiting (try_put), bad options.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "seqflow/error.h"
#include "seqflow/storage.h"
#include "error_matchers.h"
#include "sample_keys_support.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

Column values(size_t samples) { return object_column("x", std::vector<std::string>(samples, "v")); }

void put(StorageUnit& unit, int64_t begin, int64_t end, const std::string& partition = kTestPartition) {
  const std::vector<int64_t> gis = index_range(begin, end);
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
  unit.clear(index_range(0, 2));
  put(unit, 6, 8, "a");
  const auto usage = unit.partition_usage();
  ASSERT_EQ(usage.size(), 2u);
  for (const auto& partition : usage) EXPECT_EQ(partition.samples, 3u) << partition.partition;
}

TEST(StorageCapacity, PerPartitionByteLimitReleasesWhatAnOverwriteReplaces) {
  constexpr uint64_t kOne = kSampleOverheadBytes + kValueOverheadBytes;
  StorageUnit unit({.max_bytes_per_partition = 2 * kOne + 10});
  unit.put(samples_of(index_range(0, 2), 1, "a"), {object_column("x", {"aaaa", "bb"})});
  EXPECT_TRUE(put_refused(unit, 2, 3, "a", {"max_bytes_per_partition", "for partition 'a'"}));
  EXPECT_TRUE(
      throws_error(ErrorCode::kInvalidArgument,
                   [&] { unit.put(samples_of(index_range(0, 1), 1, "a"), {object_column("x", {"123456789"})}); },
                   {"max_bytes_per_partition", "needs 9 bytes", "8 are free"}));
  unit.put(samples_of(index_range(0, 1), 1, "a"), {object_column("x", {"12345678"})});
  ASSERT_EQ(unit.partition_usage().size(), 1u);
  EXPECT_EQ(unit.partition_usage()[0].bytes, 2 * kOne + 10);
  EXPECT_EQ(unit.partition_usage()[0].bytes, unit.stats().bytes + unit.stats().overhead_bytes);
}

TEST(StorageCapacity, PartitionUsageFollowsCommitsDiscardsAndClears) {
  StorageUnit unit({.max_samples_per_partition = 10});
  put(unit, 0, 4, "a");
  TestSamples staged = samples_of(index_range(0, 2), 1, "a");
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
  unit.clear(index_range(0, 4));
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
  unit.clear(index_range(0, 2));  // 6 held: room for 2, but the limit filled and waits for 5
  EXPECT_TRUE(put_refused(unit, 8, 9, kTestPartition,
                          {"filled up", "low watermark 0.5 (5)", "usage is 6", "needs 1 new samples"}));
  unit.clear(index_range(2, 3));  // 5 held: open again
  put(unit, 8, 11);
  EXPECT_EQ(unit.stats().samples, 8u);
}

TEST(StorageCapacity, HysteresisAppliesPerPartition) {
  StorageUnit unit({.max_samples_per_partition = 4, .high_watermark = 1.0, .low_watermark = 0.5});
  put(unit, 0, 4, "a");
  EXPECT_TRUE(put_refused(unit, 4, 5, "a", {"for partition 'a'"}));
  put(unit, 10, 12, "b");  // b never filled
  unit.clear(index_range(0, 1));
  EXPECT_TRUE(put_refused(unit, 4, 5, "a", {"for partition 'a'", "filled up", "usage is 3"}));
  unit.clear(index_range(1, 2));
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
  const std::vector<int64_t> first = index_range(0, 2);
  EXPECT_FALSE(unit.try_put(samples_of(first), {values(2)}).has_value());
  const std::vector<int64_t> more = index_range(2, 3);
  const std::optional<StorageUnit::Full> full = unit.try_put(samples_of(more), {values(1)});
  ASSERT_TRUE(full.has_value());
  EXPECT_NE(full->message.find("storage full: max_samples is 2"), std::string::npos) << full->message;
  EXPECT_TRUE(full->ticket.has_value());
  EXPECT_EQ(unit.stats().samples, 2u);
  EXPECT_EQ(unit.capacity_stats().puts_waited, 1u);
  unit.clear(index_range(0, 1));
  EXPECT_FALSE(unit.try_put(samples_of(more), {values(1)}, full->ticket).has_value());  // retried with its ticket
  EXPECT_EQ(unit.get(samples_of(more), std::vector<std::string>{"x"}).size(), 1u);
}

// A storage service's clients: each put (by its first index) is retried
// with the ticket of its last "full" answer.
class RetryingClients {
 public:
  explicit RetryingClients(StorageUnit& unit) : unit_(unit) {}
  // The put of samples [begin, end), answered "full" or stored (nullopt).
  std::optional<std::string> try_put(int64_t begin, int64_t end) {
    const std::vector<int64_t> gis = index_range(begin, end);
    const auto held = tickets_.find(begin);
    std::optional<StorageUnit::Full> full = unit_.try_put(
        samples_of(gis), {values(gis.size())}, held == tickets_.end() ? std::nullopt : std::optional(held->second));
    tickets_.erase(begin);
    if (!full) return std::nullopt;
    if (full->ticket) tickets_[begin] = *full->ticket;
    return full->message;
  }
  const StorageUnit::Ticket& ticket(int64_t begin) const { return tickets_.at(begin); }

 private:
  StorageUnit& unit_;
  std::map<int64_t, StorageUnit::Ticket> tickets_;
};

// RetryingClients' put of samples [begin, end), named without its values.
StorageUnit::RetriedPut retried_put(int64_t begin, int64_t end) {
  const TestSamples samples = samples_of(index_range(begin, end));
  return {begin, samples.generations.front(), SampleKeys(samples).write_version, samples.global_indexes.size()};
}

// A service's waiting puts are served in order too: a put answered "full"
// holds its place while its client retries, so that a smaller later put
// does not take the room it waits for.
TEST(StorageCapacity, ARetriedPutKeepsItsPlaceInLine) {
  StorageUnit unit({.max_samples = 4, .when_full = WhenFull::kWait});
  RetryingClients clients(unit);
  const auto try_put = [&](int64_t begin, int64_t end) { return clients.try_put(begin, end); };
  ASSERT_FALSE(try_put(0, 4).has_value());
  ASSERT_TRUE(try_put(10, 13).has_value());  // the big put: 3 samples
  unit.clear(index_range(0, 1));             // room for one
  const std::optional<std::string> small = try_put(20, 21);
  ASSERT_TRUE(small.has_value()) << "the small put took the room the big one waits for";
  EXPECT_NE(small->find("1 are free and earlier waiting puts need 3 first"), std::string::npos) << *small;
  unit.clear(index_range(1, 3));  // room for the big put
  EXPECT_FALSE(try_put(10, 13).has_value());
  EXPECT_TRUE(try_put(20, 21).has_value());  // 4 held
  unit.clear(index_range(3, 4));
  EXPECT_FALSE(try_put(20, 21).has_value());
  EXPECT_EQ(unit.stats().samples, 4u);
  EXPECT_EQ(unit.capacity_stats().waiting_puts, 0u);
}

// A client that stops asking (gone, or past its budget) loses its place:
// the puts behind it get the room.
TEST(StorageCapacity, APlaceInLineLapsesWhenItsClientStopsAsking) {
  StorageUnit unit({.max_samples = 2, .when_full = WhenFull::kWait});
  RetryingClients clients(unit);
  const auto try_put = [&](int64_t begin, int64_t end) { return clients.try_put(begin, end); };
  ASSERT_FALSE(try_put(0, 2).has_value());
  ASSERT_TRUE(try_put(10, 12).has_value());  // never asked again
  unit.clear(index_range(0, 1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool landed = false;
  while (!landed && std::chrono::steady_clock::now() < deadline) {
    landed = !try_put(20, 21).has_value();
    if (!landed) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // as a client backs off
  }
  EXPECT_TRUE(landed);
  EXPECT_EQ(unit.stats().samples, 2u);
  EXPECT_EQ(unit.capacity_stats().waiting_puts, 0u);
}

// The samples of a waiting put can be guessed, its ticket cannot: a caller
// without it neither takes the put's place (a put of the same samples
// queues behind it) nor asks for it nor makes it leave.
TEST(StorageCapacity, OnlyTheTicketsHolderUsesAWaitingPutsPlace) {
  StorageUnit unit({.max_samples = 3, .when_full = WhenFull::kWait});
  RetryingClients honest(unit);
  RetryingClients guesser(unit);
  ASSERT_FALSE(honest.try_put(0, 3).has_value());
  ASSERT_TRUE(honest.try_put(10, 12).has_value());  // waits, first in line: 2 samples
  ASSERT_TRUE(honest.try_put(20, 21).has_value());  // waits behind it
  StorageUnit::Ticket wrong = honest.ticket(10);
  wrong[0] ^= 1;
  for (const StorageUnit::Ticket& ticket : {wrong, honest.ticket(20)}) {
    const StorageUnit::Room asked = unit.room_for(retried_put(10, 12), ticket);
    EXPECT_FALSE(asked.placed);
    ASSERT_TRUE(asked.not_placed.has_value());
    EXPECT_NE(asked.not_placed->find("holds this ticket"), std::string::npos) << *asked.not_placed;
    EXPECT_FALSE(unit.leave_line(retried_put(10, 12), ticket).placed);
  }
  EXPECT_EQ(unit.capacity_stats().waiting_puts, 2u);
  unit.clear(index_range(0, 2));  // room for the first
  // The same samples without the ticket: a place of its own, behind both.
  EXPECT_TRUE(guesser.try_put(10, 12).has_value()) << "a put of the same samples took the first one's place";
  EXPECT_TRUE(honest.try_put(20, 21).has_value()) << "the put behind took the room the first one waits for";
  const StorageUnit::Room first = unit.room_for(retried_put(10, 12), honest.ticket(10));
  EXPECT_TRUE(first.placed);
  EXPECT_FALSE(first.full.has_value()) << *first.full;
  EXPECT_FALSE(honest.try_put(10, 12).has_value());
  EXPECT_EQ(unit.stats().samples, 3u);
  EXPECT_EQ(unit.capacity_stats().waiting_puts, 2u);  // the put of 20 and the guesser's
  EXPECT_TRUE(unit.leave_line(retried_put(20, 21), honest.ticket(20)).placed);
  EXPECT_TRUE(unit.leave_line(retried_put(10, 12), guesser.ticket(10)).placed);
  EXPECT_EQ(unit.capacity_stats().waiting_puts, 0u);
}

// A peer that guesses a put's samples and sends them first cannot deny the
// put a place: each holds one of its own, in arrival order, so the put
// still goes before a later one.
TEST(StorageCapacity, APutWhoseSamplesAnotherWaitingPutNamesHoldsAPlaceOfItsOwn) {
  StorageUnit unit({.max_samples = 2, .when_full = WhenFull::kWait});
  RetryingClients squatter(unit);
  RetryingClients honest(unit);
  RetryingClients later(unit);
  ASSERT_FALSE(honest.try_put(0, 2).has_value());
  ASSERT_TRUE(squatter.try_put(10, 11).has_value());
  const std::optional<StorageUnit::Full> answer = unit.try_put(samples_of(index_range(10, 11)), {values(1)});
  ASSERT_TRUE(answer.has_value());
  ASSERT_TRUE(answer->ticket.has_value()) << "the put of samples another one named holds no place";
  ASSERT_TRUE(later.try_put(20, 21).has_value());
  EXPECT_EQ(unit.capacity_stats().waiting_puts, 3u);
  unit.clear(index_range(0, 2));  // room for the squatter's place and the next
  EXPECT_FALSE(unit.try_put(samples_of(index_range(10, 11)), {values(1)}, answer->ticket).has_value());
  EXPECT_TRUE(later.try_put(20, 21).has_value()) << "the later put took the room of the one before it";
  EXPECT_EQ(unit.stats().samples, 1u);
}

// puts_waited counts the places given, once per put; full_answers every
// "full" sent, to a retry or room request too, and to a put given no place.
TEST(StorageCapacity, PutsWaitedCountsPlacesAndFullAnswersEveryFull) {
  constexpr size_t kPlaces = 64;  // few: each try walks the places, and a slow run must not let them lapse
  StorageUnit unit({.max_samples = 1, .when_full = WhenFull::kWait, .max_waiting_puts = kPlaces});
  RetryingClients clients(unit);
  ASSERT_FALSE(clients.try_put(0, 1).has_value());
  const int64_t first = 10;
  for (int64_t gi = first; gi < first + static_cast<int64_t>(kPlaces); ++gi) {
    ASSERT_TRUE(clients.try_put(gi, gi + 1).has_value());
  }
  const int64_t beyond = first + static_cast<int64_t>(kPlaces);
  const std::optional<StorageUnit::Full> unplaced =
      unit.try_put(samples_of(index_range(beyond, beyond + 1)), {values(1)});
  ASSERT_TRUE(unplaced.has_value());
  EXPECT_FALSE(unplaced->ticket.has_value()) << "more than max_waiting_puts hold a place";
  ASSERT_TRUE(clients.try_put(first, first + 1).has_value());  // retried with its ticket: the same place
  ASSERT_TRUE(unit.room_for(retried_put(first, first + 1), clients.ticket(first)).full.has_value());
  const CapacityStats stats = unit.capacity_stats();
  EXPECT_EQ(stats.puts_waited, kPlaces);
  EXPECT_EQ(stats.full_answers, kPlaces + 3);
  EXPECT_EQ(stats.waiting_puts, kPlaces);
}

TEST(StorageCapacity, MaxWaitingPutsMustBeAtLeastOne) {
  EXPECT_TRUE(throws_invalid([] { StorageUnit unit({.when_full = WhenFull::kWait, .max_waiting_puts = 0}); },
                             {"max_waiting_puts", "got 0"}));
}

TEST(StorageCapacity, TryPutInRaiseModeRaisesAsPut) {
  StorageUnit unit({.max_samples = 1});
  const std::vector<int64_t> gis = index_range(0, 2);
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
