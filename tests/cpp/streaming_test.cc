// The rules of a rank's stream of batches (seqflow/streaming.h).
#include "seqflow/streaming.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <string>
#include <vector>

#include "seqflow/error.h"

namespace seqflow::streaming {
namespace {

TEST(WorkerShare, WorkersTakeEveryWthBatchFromTheirOwnIndex) {
  const WorkerShare share(1, 3);
  EXPECT_EQ(share.first(), 1);
  EXPECT_EQ(share.next(share.first()), 4);
  EXPECT_EQ(share.next(4), 7);
}

TEST(WorkerShare, RefusesAWorkerOutsideItsCount) {
  EXPECT_THROW(WorkerShare(2, 2), Error);
  EXPECT_THROW(WorkerShare(-1, 2), Error);
  EXPECT_THROW(WorkerShare(0, 0), Error);
}

TEST(ProductionComplete, WithoutTotalEverySampleHoldsEveryField) {
  const std::array<bool, 3> all{true, true, true};
  const std::array<bool, 3> some{true, false, true};
  const FiniteOptions options;
  EXPECT_TRUE(production_complete(options, all));
  EXPECT_FALSE(production_complete(options, some));
  EXPECT_FALSE(production_complete(options, std::span<const bool>{}));  // no sample yet
}

TEST(ProductionComplete, WithTotalCountsProducedSamples) {
  const std::array<bool, 4> produced{true, false, true, true};
  EXPECT_TRUE(production_complete({.batch_size = 1, .total_samples = 3, .drop_last = false}, produced));
  EXPECT_FALSE(production_complete({.batch_size = 1, .total_samples = 4, .drop_last = false}, produced));
}

TEST(LeftToConsume, CountsProducedSamplesTheTaskHasNotConsumed) {
  const std::array<int64_t, 4> indexes{10, 11, 12, 13};
  const std::array<bool, 4> produced{true, true, false, true};
  const std::array<int64_t, 3> consumed_indexes{10, 12, 13};
  const std::array<bool, 3> consumed{true, true, false};
  EXPECT_EQ(left_to_consume(indexes, produced, consumed_indexes, consumed), 2);  // 11 and 13
}

TEST(LeftToConsume, RefusesFlagsThatDoNotMatchTheIndexes) {
  const std::array<int64_t, 2> indexes{0, 1};
  const std::array<bool, 1> produced{true};
  EXPECT_THROW(left_to_consume(indexes, produced, {}, {}), Error);
}

TEST(FetchAfterProduction, AsksForTheShortLastBatchUnlessDropLast) {
  const FiniteOptions keep{.batch_size = 3, .total_samples = std::nullopt, .drop_last = false};
  const LastFetch tail = fetch_after_production(keep, 2);
  EXPECT_EQ(tail.batch_size, 2);
  EXPECT_FALSE(tail.ends_if_empty);  // another rank may have taken them: ask again
  EXPECT_EQ(fetch_after_production(keep, 7).batch_size, 3);
  const LastFetch done = fetch_after_production(keep, 0);
  EXPECT_EQ(done.batch_size, 3);
  EXPECT_TRUE(done.ends_if_empty);
  const LastFetch dropped =
      fetch_after_production({.batch_size = 3, .total_samples = std::nullopt, .drop_last = true}, 2);
  EXPECT_EQ(dropped.batch_size, 3);
  EXPECT_TRUE(dropped.ends_if_empty);
}

TEST(StallReason, NamesFieldsNoSampleHolds) {
  const std::vector<std::string> fields{"input_ids", "rewrd", "mask"};
  const std::array<bool, 3> has{true, false, false};
  EXPECT_EQ(stall_reason(fields, has, std::nullopt),
            "no sample of the partition has field(s) 'rewrd', 'mask'; check the names against what the producers put");
}

TEST(StallReason, NamesSamplesLeftOnceProductionIsComplete) {
  const std::vector<std::string> fields{"x"};
  const std::array<bool, 1> has{true};
  EXPECT_EQ(stall_reason(fields, has, 5),
            "production is complete, but the sampler serves no batch of the 5 sample(s) left (with drop_last=True the "
            "stream ends without them)");
  EXPECT_EQ(stall_reason(fields, has, 0), std::nullopt);
  EXPECT_EQ(stall_reason(fields, has, std::nullopt), std::nullopt);
  EXPECT_EQ(stall_reason(fields, {}, 5), std::nullopt);  // nothing put yet: producers may be slow
}

TEST(StallWatch, ChecksAfterWaitingUntilItHasWarned) {
  using namespace std::chrono_literals;
  StallWatch watch(10s);
  const StallWatch::Clock::time_point start{};
  EXPECT_FALSE(watch.empty_fetch(start));
  EXPECT_FALSE(watch.empty_fetch(start + 9s));
  EXPECT_TRUE(watch.empty_fetch(start + 10s));
  EXPECT_TRUE(watch.empty_fetch(start + 11s));  // checked, no reason found: checks again
  watch.batch_came();
  EXPECT_FALSE(watch.empty_fetch(start + 30s));  // waiting starts anew
  EXPECT_TRUE(watch.empty_fetch(start + 40s));
  watch.warned();
  EXPECT_FALSE(watch.empty_fetch(start + 100s));
}

}  // namespace
}  // namespace seqflow::streaming
