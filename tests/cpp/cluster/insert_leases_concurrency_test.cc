// A put's insert is a lease of its producer: samples inserted, written to
// storage and never marked produced (the producer died mid-put) are
// reclaimed once the lease expires, their storage freed; a put that
// completes is never touched, and a late mark of reclaimed samples fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/remote_control_plane.h"
#include "remote_cluster.h"
#include "remote_service_test_support.h"
#include "seqflow/error.h"
#include "seqflow/partition_id_list.h"
#include "server/insert_leases.h"
#include "service_test_support.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

using namespace std::chrono_literals;

double reclaimed(server::ControllerService& service) {
  return service.metrics().counter("seqflow_insert_samples_reclaimed_total", "").value();
}

TEST(InsertLeases, SamplesADeadProducerLeftUnproducedAreReclaimedAndTheirStorageFreed) {
  server::ControllerServiceOptions options;
  options.insert_lease = 300ms;
  RemoteCluster cluster(1, {}, options);
  auto client = cluster.client();
  RemoteControlPlane dying(
      std::make_shared<transport::ConnectionPool>(std::make_shared<zmq::context_t>(1), cluster.controller_endpoint(),
                                                  transport::ConnectionOptions{.timeout = 5s, .security = {}}),
      5s);
  // Inserted and written, never marked produced: the producer died there.
  const BatchMeta orphaned = dying.insert("p", 3);
  PartitionIdList partitions;
  for (size_t i = 0; i < orphaned.size(); ++i) partitions.push_back("p");
  cluster.unit(0).storage().put(SampleKeys{orphaned.global_indexes, partitions, orphaned.generations},
                                {int64_column("x", {1, 2, 3})});
  const BatchMeta complete = client->put_new("p", {int64_column("x", {4, 5})}, ids(4, 2));
  ASSERT_EQ(cluster.unit(0).storage().stats().samples, 5u);

  ASSERT_TRUE(server::test::holds_within_10s([&] { return reclaimed(cluster.controller()) == 3.0; }));
  const std::string fields[] = {"x"};
  const auto status = client->control().production_status(fields, "p");
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->global_indexes, complete.global_indexes) << "the completed put must stay, whole";
  EXPECT_EQ(cluster.unit(0).storage().stats().samples, 2u) << "the reclaimed samples' data stays on the unit";
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample,
                           [&] { dying.mark_produced("p", orphaned.global_indexes, orphaned.generations, {}, {}); },
                           {}));
  MetaRequest all = fetch(2, "p", "train");
  EXPECT_EQ(values_of(*client, client->get_meta(all)), (std::vector<int64_t>{4, 5}));

  // An insert that made its partition and whose producer vanished (its
  // reply lost, say): the partition goes with its samples.
  dying.insert("lost", 2);
  ASSERT_TRUE(server::test::holds_within_10s([&] { return reclaimed(cluster.controller()) == 5.0; }));
  const auto listed = client->control().partition_list();
  EXPECT_EQ(std::count(listed.begin(), listed.end(), "lost"), 0) << "an empty partition stayed";
}

TEST(InsertLeases, APutThatCompletesIsNeverReclaimed) {
  server::ControllerServiceOptions options;
  // Long enough for a put's first call under ThreadSanitizer on a busy
  // machine (a lease of 200 ms once ran out during one and reclaimed it).
  options.insert_lease = 1500ms;
  RemoteCluster cluster(1, {}, options);
  auto client = cluster.client();
  for (int64_t round = 0; round < 20; ++round) client->put_new("p", {int64_column("x", {round})}, ids(round, 1));
  std::this_thread::sleep_for(2s);  // past every lease: none is left to expire
  EXPECT_EQ(reclaimed(cluster.controller()), 0.0);
  MetaRequest all = fetch(20, "p", "train");
  EXPECT_EQ(client->get_meta(all).size(), 20u);
}

// The lease book alone: settled leases are dropped, an expired one is
// reclaimed once, a failed reclaim is retried.
TEST(InsertLeases, SettledLeasesAreForgottenAndAFailedReclaimIsRetried) {
  std::mutex mutex;
  std::vector<std::string> calls;
  int failures_left = 1;
  server::InsertLeases leases(
      [&](const std::string& partition, const std::vector<int64_t>& indexes, const std::vector<uint64_t>&, bool) {
        std::lock_guard lock(mutex);
        if (failures_left-- > 0) throw Error(ErrorCode::kTimeout, "a unit is unreachable");
        calls.push_back(partition + ":" + std::to_string(indexes.front()));
      });
  const auto soon = std::chrono::steady_clock::now() + 50ms;
  leases.grant("a", {1, 2}, {7, 7}, false, soon);
  leases.grant("b", {3}, {7}, true, soon);
  const int64_t produced[] = {1, 2};
  leases.settle("a", produced);
  const int64_t partly[] = {3, 4};
  leases.settle("b", partly);  // not the lease's samples: it stays
  ASSERT_TRUE(server::test::holds_within_10s([&] {
    std::lock_guard lock(mutex);
    return !calls.empty();
  }));
  std::lock_guard lock(mutex);
  EXPECT_EQ(calls, std::vector<std::string>{"b:3"});
  EXPECT_EQ(leases.held(), 0u);
}

// A lease whose first sample was cleared and handed to a new insert keeps
// running: the new grant of the same first index neither settles nor
// replaces it, and it still reclaims its own samples when it expires.
TEST(InsertLeases, ALeaseWhoseFirstIndexIsReusedStillExpires) {
  std::mutex mutex;
  std::vector<std::vector<int64_t>> reclaimed;
  server::InsertLeases leases(
      [&](const std::string&, const std::vector<int64_t>& indexes, const std::vector<uint64_t>&, bool) {
        std::lock_guard lock(mutex);
        reclaimed.push_back(indexes);
      });
  const auto now = std::chrono::steady_clock::now();
  leases.grant("p", {5, 6, 7}, {1, 1, 1}, false, now + 50ms);  // its producer died; 5 was cleared since
  leases.grant("p", {5, 9}, {2, 2}, false, now + 20s);
  const int64_t second[] = {5, 9};
  leases.settle("p", second);  // the new insert's producer finished
  ASSERT_TRUE(server::test::holds_within_10s([&] {
    std::lock_guard lock(mutex);
    return !reclaimed.empty();
  }));
  std::lock_guard lock(mutex);
  EXPECT_EQ(reclaimed, (std::vector<std::vector<int64_t>>{{5, 6, 7}}));
  EXPECT_EQ(leases.held(), 0u);
}

}  // namespace
}  // namespace seqflow::test
