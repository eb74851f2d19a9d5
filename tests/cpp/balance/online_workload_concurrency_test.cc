// OnlineWorkload under real threads: reporters and readers at once, refits in
// the background, and destruction while a refit is pending.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "calibration_test_support.h"
#include "seqflow/calibration.h"
#include "test_support.h"

namespace seqflow {
namespace {

constexpr SecondsCoefficients kTruth{2e-6, 3e-11, 5e-4, 0.02};

TEST(OnlineWorkloadConcurrency, ThreadsReportWhileOthersReadTheModel) {
  constexpr int kReporters = 4;
  constexpr size_t kPerReporter = 300;
  OnlineWorkload online(Workload::tokens(), {.window = 512, .min_records = 16});
  std::atomic<bool> reporting{true};
  std::atomic<int> bad_snapshots{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kReporters; ++t) {
    threads.emplace_back([&, t] {
      test::Rng rng(test::kSeed + static_cast<uint64_t>(t));
      for (const auto& record : test::synthetic_timings(kTruth, kPerReporter, 0.0, rng)) {
        online.report(record.lengths, record.seconds);
      }
    });
  }
  threads.emplace_back([&] {
    // Every snapshot is the prior or a fit of exact timings (so the truth).
    while (reporting.load()) {
      const Workload w = online.current();
      if (w != Workload::tokens() && !test::near_relative(w.coefficients().per_token, kTruth.per_token, 1e-6)) {
        ++bad_snapshots;
      }
      online.reports();
    }
  });
  for (int t = 0; t < kReporters; ++t) threads[static_cast<size_t>(t)].join();
  online.wait_for_refit();
  reporting = false;
  threads.back().join();
  EXPECT_EQ(bad_snapshots.load(), 0);
  EXPECT_EQ(online.reports(), kReporters * static_cast<int64_t>(kPerReporter));
  const Workload w = online.current();
  ASSERT_EQ(w.kind(), Workload::Kind::kCalibrated);
  EXPECT_EQ(w.fit().records, 512);
  EXPECT_TRUE(test::near_relative(w.coefficients().per_token_squared, kTruth.per_token_squared, 1e-6));
}

TEST(OnlineWorkloadConcurrency, WaitersAndDestructionWithARefitPending) {
  test::Rng rng(test::kSeed);
  const auto records = test::synthetic_timings(kTruth, 200, 0.0, rng);
  for (int round = 0; round < 5; ++round) {
    OnlineWorkload online(Workload::verl(), {.window = 128, .min_records = 16});
    std::thread waiter([&] {
      for (int i = 0; i < 20; ++i) online.wait_for_refit();
    });
    for (const auto& record : records) online.report(record.lengths, record.seconds);
    waiter.join();
    EXPECT_EQ(online.reports(), static_cast<int64_t>(records.size()));
    // Destroyed here, usually with records not yet fitted: the refit thread is joined.
  }
}

}  // namespace
}  // namespace seqflow
