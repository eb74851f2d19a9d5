// The metrics registry under threads: counters and histograms updated and
// rendered from many threads at once count every update.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "server/metrics.h"
#include "service_test_support.h"

namespace seqflow::server {
namespace {

using namespace seqflow::server::test;

TEST(MetricsConcurrency, CountersAndHistogramsFromManyThreads) {
  MetricsRegistry registry;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        registry.counter("seqflow_hits_total", "Hits.", {{"thread", std::to_string(t % 2)}}).increment();
        registry.histogram("seqflow_latency_seconds", "Latency.").observe(0.001 * (i % 10));
        if (i % 1000 == 0) (void)registry.render();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(registry.counter("seqflow_hits_total", "", {{"thread", "0"}}).value(), 10000);
  EXPECT_EQ(registry.histogram("seqflow_latency_seconds", "").count(), 20000u);
  EXPECT_TRUE(is_prometheus_text(registry.render()));
}

}  // namespace
}  // namespace seqflow::server
