// The controller under real threads: producers and consumers of several
// tasks, and DP ranks of a balanced sampler racing each other. Every sample
// must reach every task exactly once. Timing reports race checkpoint loads
// that replace the task models. SEQFLOW_CONCURRENCY_SAMPLES sets the
// sample count (default 100000; the ThreadSanitizer run uses fewer).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "controller_test_support.h"
#include "seqflow/controller.h"
#include "seqflow/sampler.h"

namespace seqflow {
namespace {

using std::chrono::milliseconds;
using test::fetch_request;
using test::put;
using test::throws_code;

int64_t sample_count(int64_t fallback) {
  const char* value = std::getenv("SEQFLOW_CONCURRENCY_SAMPLES");
  return value != nullptr ? std::max<int64_t>(1, std::atoll(value)) : fallback;
}

// Blocking fetches with a short timeout, so a consumer notices the end.
std::vector<int64_t> fetch_until(Controller& controller, const MetaRequest& request, const std::atomic<bool>& done) {
  while (!done) {
    try {
      return controller.get_meta(request).global_indexes;
    } catch (const Error& error) {
      if (error.code() != ErrorCode::kTimeout) throw;
    }
  }
  return {};
}

TEST(ControllerConcurrency, EightProducersSixteenConsumersThreeTasksExactlyOnce) {
  constexpr int kProducers = 8;
  constexpr int kConsumers = 16;
  constexpr int kPut = 50;    // samples per put
  constexpr int kBatch = 50;  // samples per fetch
  const std::vector<std::string> tasks = {"actor", "ref", "critic"};
  // Whole puts per producer and whole batches per task.
  const int64_t puts = std::max<int64_t>(kProducers, sample_count(100000) / kPut);
  const int64_t total = puts / kProducers * kProducers * kPut;

  Controller controller;
  // The partition exists, empty, before consumers start; indexes run 0..total-1.
  controller.insert("p", 1);
  controller.clear_samples("p", std::vector<int64_t>{0}, {});

  std::vector<std::vector<int>> times_seen(tasks.size(), std::vector<int>(total, 0));
  std::vector<std::mutex> seen_mutex(tasks.size());
  std::vector<std::atomic<int64_t>> consumed(tasks.size());
  std::atomic<bool> done{false};
  std::atomic<bool> failed{false};

  std::vector<std::thread> threads;
  for (int producer = 0; producer < kProducers; ++producer) {
    threads.emplace_back([&] {
      for (int64_t i = 0; i < total / kProducers / kPut; ++i) {
        const BatchMeta inserted = controller.insert("p", kPut);
        std::vector<Value> meta;
        for (int64_t index : inserted.global_indexes) {
          meta.push_back({{"total_lengths", 100 + index % 50}});
        }
        controller.mark_produced("p", inserted.global_indexes, {}, test::fields_of({"x", "y"}), meta);
      }
    });
  }
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&, c] {
      const size_t task = static_cast<size_t>(c) % tasks.size();
      MetaRequest request = fetch_request("p", tasks[task], {"x", "y"}, kBatch);
      request.polling = false;
      request.timeout = milliseconds(50);
      try {
        while (!done) {
          const auto batch = fetch_until(controller, request, done);
          if (batch.empty()) continue;
          {
            std::lock_guard lock(seen_mutex[task]);
            for (int64_t index : batch) ++times_seen[task][static_cast<size_t>(index)];
          }
          bool all = true;
          consumed[task] += static_cast<int64_t>(batch.size());
          for (auto& count : consumed) all = all && count.load() == total;
          if (all) done = true;
        }
      } catch (const std::exception& error) {
        ADD_FAILURE() << "consumer " << c << ": " << error.what();
        failed = true;
        done = true;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_FALSE(failed);
  for (size_t t = 0; t < tasks.size(); ++t) {
    SCOPED_TRACE(tasks[t]);
    EXPECT_EQ(consumed[t].load(), total);
    int64_t once = 0;
    for (int count : times_seen[t]) once += count == 1;
    EXPECT_EQ(once, total) << "samples lost or duplicated";
    EXPECT_TRUE(controller.all_consumed(tasks[t], "p"));
  }
}

// DP ranks of a seqlen-balanced sampler, each running through batch indexes
// at its own pace while producers put groups: no sample reaches two ranks.
TEST(ControllerConcurrency, BalancedRanksRacingNeverShareASample) {
  constexpr int kRanks = 4;
  constexpr int kGroup = 4;
  constexpr int kPerRank = 8;  // samples per rank and batch
  const int64_t batches = std::max<int64_t>(4, sample_count(100000) / 200 / (kRanks * kPerRank));
  const int64_t total = batches * kRanks * kPerRank;
  Controller controller(ControllerOptions{make_seqlen_balanced_sampler(kGroup, kRanks), false});
  controller.insert("p", 1);
  controller.clear_samples("p", std::vector<int64_t>{0}, {});

  std::vector<int> times_seen(static_cast<size_t>(total), 0);
  std::mutex seen_mutex;
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&] {
      for (int64_t i = 0; i < total / kGroup / 2; ++i) {
        const BatchMeta inserted = controller.insert("p", kGroup);
        std::vector<Value> meta;
        for (int64_t index : inserted.global_indexes) meta.push_back({{"total_lengths", 1 + index % 97}});
        controller.mark_produced("p", inserted.global_indexes, {}, test::fields_of({"x"}), meta);
      }
    });
  }
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        for (int64_t b = 0; b < batches; ++b) {
          MetaRequest request = fetch_request("p", "t", {"x"}, kPerRank, rank, b);
          request.polling = false;
          request.timeout = milliseconds(60000);
          const auto batch = controller.get_meta(request).global_indexes;
          std::lock_guard lock(seen_mutex);
          for (int64_t index : batch) ++times_seen[static_cast<size_t>(index)];
        }
      } catch (const std::exception& error) {
        ADD_FAILURE() << "rank " << rank << ": " << error.what();
        failed = true;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_FALSE(failed);
  for (size_t i = 0; i < times_seen.size(); ++i) {
    ASSERT_EQ(times_seen[i], 1) << "global index " << i;
  }
}

TEST(ControllerConcurrency, TimingReportsAndReadsRaceLoadsThatReplaceTheModels) {
  const std::vector<int64_t> lengths = {100, 200};
  const std::vector<TimingRecord> one = {{lengths, 0.01}};
  const test::TempFile saved("task_models_saved");
  const test::TempFile resaved("task_models_resaved");
  Controller controller;
  for (int i = 0; i < 20; ++i) controller.report_timing("actor", one);
  controller.save(saved.path());
  std::atomic<bool> loading{true};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      while (loading) controller.report_timing(t == 0 ? "actor" : "critic", one);
    });
  }
  threads.emplace_back([&] {
    while (loading) {
      if (auto model = controller.task_workload("actor")) {
        EXPECT_GE(model->reports, 1);
      }
      controller.task_workloads();
    }
  });
  for (int round = 0; round < 10; ++round) {
    controller.load(saved.path());
    controller.save(resaved.path());
  }
  loading = false;
  for (auto& thread : threads) thread.join();
  controller.load(saved.path());
  EXPECT_EQ(controller.task_workload("actor")->reports, 20);
  EXPECT_FALSE(controller.task_workload("critic").has_value());
}

TEST(ControllerTest, BlockingFetchWakesWhenDataArrives) {
  Controller controller;
  controller.insert("p", 1);
  const auto indexes = controller.insert("p", 2).global_indexes;
  std::thread producer([&] {
    std::this_thread::sleep_for(milliseconds(100));
    controller.mark_produced("p", indexes, {}, test::fields_of({"x"}), {});
  });
  MetaRequest request = fetch_request("p", "t", {"x"}, 2);
  request.polling = false;
  request.timeout = milliseconds(20000);
  // Woken by the producer: the batch comes back well before the 20 s
  // timeout, which is only the test's deadline (a timeout throws).
  const BatchMeta meta = controller.get_meta(request);
  producer.join();
  EXPECT_EQ(meta.global_indexes, indexes);
}

TEST(ControllerTest, BlockingFetchTimesOutWhileOthersProceed) {
  Controller controller;
  controller.insert("p", 1);
  std::atomic<bool> timed_out{false};
  std::atomic<bool> waiter_done{false};
  std::thread waiter([&] {
    MetaRequest request = fetch_request("p", "t", {"x"}, 1);
    request.polling = false;
    request.timeout = milliseconds(2000);
    timed_out = throws_code([&] { controller.get_meta(request); }, ErrorCode::kTimeout, {"2000 ms", "'p'", "'t'"});
    waiter_done = true;
  });
  // While the waiter blocks, other callers get through: all of them before
  // its timeout ends its wait.
  for (int i = 0; i < 50; ++i) {
    put(controller, "other", 1, {"x"});
    EXPECT_EQ(controller.get_meta(fetch_request("other", "t", {"x"}, 1)).size(), 1u);
  }
  EXPECT_FALSE(waiter_done) << "the waiter timed out before the other callers were through";
  waiter.join();
  EXPECT_TRUE(timed_out);
}

// A waiting fetch of a partition that does not exist waits for it to be
// created and filled (TransferQueue's producers and consumers start in any
// order), also when its partition is cleared (and made again) meanwhile.
TEST(ControllerTest, BlockingFetchWaitsForItsPartitionToBeCreatedAndFilled) {
  Controller controller;
  controller.insert("old", 1);
  std::optional<BatchMeta> fresh, recreated;
  std::thread waiters([&] {
    MetaRequest request = fetch_request("fresh", "t", {"x"}, 2);
    request.polling = false;
    request.timeout = milliseconds(20000);
    std::thread other([&] {
      MetaRequest again = fetch_request("old", "t", {"x"}, 1);
      again.polling = false;
      again.timeout = milliseconds(20000);
      recreated = controller.get_meta(again);
    });
    fresh = controller.get_meta(request);
    other.join();
  });
  std::this_thread::sleep_for(milliseconds(100));
  controller.clear_partition("old");
  controller.insert("fresh", 1);  // created, nothing produced yet
  std::this_thread::sleep_for(milliseconds(50));
  const auto a = put(controller, "fresh", 2, {"x"});
  const auto b = put(controller, "old", 1, {"x"});
  waiters.join();
  ASSERT_TRUE(fresh && recreated);
  EXPECT_EQ(fresh->global_indexes, a);
  EXPECT_EQ(recreated->global_indexes, b);

  // Until its timeout, which names the partition that never came.
  MetaRequest never = fetch_request("never", "t", {"x"}, 1);
  never.polling = false;
  never.timeout = milliseconds(100);
  EXPECT_TRUE(
      throws_code([&] { controller.get_meta(never); }, ErrorCode::kTimeout, {"100 ms", "not created", "'never'"}));
  EXPECT_FALSE(controller.try_get_meta(never).has_value()) << "a waiting fetch, declined without waiting";
}

}  // namespace
}  // namespace seqflow
