// Same-host copies under threads: frame leases held and given back by many
// threads are never lost or shared, and clients on several threads put and
// get their own data through memory.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "local_copy_test_support.h"
#include "remote_cluster.h"
#include "storage_test_support.h"
#include "transport/frame_leases.h"

namespace seqflow::test {
namespace {

TEST(FrameLeasesConcurrency, ThreadsHoldingAndGivingBackNeverLoseOrShareALease) {
  transport::FrameLeases leases(std::chrono::seconds(60));
  constexpr int kThreads = 4, kRounds = 300;
  std::atomic<int> given_back{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<uint64_t> mine;
      for (int r = 0; r < kRounds; ++r) {
        mine.push_back(leases.hold(data_frames({64})));
        if (r % 2 == 1) {
          given_back += leases.release(mine.back()) ? 1 : 0;
          mine.pop_back();
        }
      }
      for (const uint64_t id : mine) given_back += leases.release(id) ? 1 : 0;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(given_back.load(), kThreads * kRounds);
  EXPECT_EQ(leases.held(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Units, LocalCopyCluster, ::testing::ValuesIn(kLocalCopyUnitCounts));

TEST_P(LocalCopyCluster, ConcurrentClientsPutAndGetTheirOwnDataThroughMemory) {
  RemoteCluster cluster(GetParam());
  std::vector<std::thread> threads;
  std::atomic<int> rounds_ok{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      auto client = cluster.client();
      const std::string partition = "p" + std::to_string(t);
      for (int r = 0; r < 3; ++r) {
        const Column column = wide_column("a", 32 + t, 4096 + 1024 * r);  // each thread and round its own shape
        const BatchMeta meta = client->put_new(partition, {column}, {});
        const std::vector<std::string> fields{"a"};
        const auto rows = client->get_data(meta, fields);
        bool same = rows.size() == column.sample_count();
        for (size_t i = 0; same && i < rows.size(); ++i) {
          same = to_bytes(rows[i][0].bytes()) == to_bytes(column.sample(i).bytes());
        }
        rounds_ok += same ? 1 : 0;
        client->clear_partition(partition);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(rounds_ok.load(), 9);
  EXPECT_GT(local_copy_bytes(cluster, "get"), 0.0);
  for (size_t u = 0; u < cluster.unit_count(); ++u) {
    EXPECT_NE(cluster.unit(u).metrics().render().find("seqflow_storage_leases 0"), std::string::npos);
  }
}

}  // namespace
}  // namespace seqflow::test
