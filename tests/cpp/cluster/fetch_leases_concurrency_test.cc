// Fetch leases in remote mode: a consumer that fetched with a lease and died
// never acknowledges; the controller service gives its samples back when the
// lease expires, to a fetch already waiting, with no other call coming in.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "remote_cluster.h"
#include "remote_service_test_support.h"
#include "seqflow/client.h"

namespace seqflow::test {
namespace {

using namespace std::chrono_literals;

MetaRequest leased(int64_t batch_size, std::chrono::milliseconds lease, bool polling = true) {
  MetaRequest request = fetch(batch_size, "p", "train");
  request.lease = lease;
  request.polling = polling;
  request.timeout = 10s;
  return request;
}

TEST(FetchLeasesRemote, AWaitingFetchGetsTheSamplesOfAnExpiredLease) {
  RemoteCluster cluster(1);
  auto producer = cluster.client();
  auto dead = cluster.client();
  auto live = cluster.client();
  producer->put_new("p", {int64_column("x", {1, 2})}, ids(0, 2));
  const BatchMeta held = dead->get_meta(leased(2, 300ms));  // then it dies: never acknowledges
  ASSERT_EQ(held.size(), 2u);
  MetaRequest waiting = fetch(2, "p", "train");
  waiting.polling = false;
  waiting.timeout = 10s;
  const auto start = std::chrono::steady_clock::now();
  const BatchMeta again = live->get_meta(waiting);  // waits; only the expiry can answer it
  EXPECT_EQ(again.global_indexes, held.global_indexes);
  EXPECT_EQ(values_of(*live, again), (std::vector<int64_t>{1, 2}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(end_leases(dead->control(), held, "train", false), 0u) << "a late acknowledgement ends nothing";
}

TEST(FetchLeasesRemote, AcknowledgedStaysConsumedReleasedComesBack) {
  RemoteCluster cluster(1);
  auto client = cluster.client();
  client->put_new("p", {int64_column("x", {1, 2, 3})}, ids(0, 3));
  const BatchMeta acknowledged = client->get_meta(leased(1, 200ms));
  EXPECT_EQ(end_leases(client->control(), acknowledged, "train", false), 1u);
  const BatchMeta released = client->get_meta(leased(2, 1h));
  const std::string metrics = cluster.controller().metrics().render();
  EXPECT_NE(metrics.find("seqflow_partition_leased{partition=\"p\",task=\"train\"} 2\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("seqflow_partition_consumed{partition=\"p\",task=\"train\"} 3\n"), std::string::npos);
  EXPECT_EQ(end_leases(client->control(), released, "train", true), 2u);
  std::this_thread::sleep_for(400ms);  // past the acknowledged lease
  const BatchMeta rest = client->get_meta(fetch(2, "p", "train"));
  EXPECT_EQ(rest.global_indexes, released.global_indexes);
  EXPECT_EQ(client->get_meta(fetch(1, "p", "train")).size(), 0u) << "the acknowledged one came back";
}

TEST(FetchLeasesRemote, ALeaseTakenByAFetchThatWaitedExpiresToo) {
  RemoteCluster cluster(1);
  auto consumer = cluster.client();
  auto producer = cluster.client();
  // Waits before any data exists: a waiter answers it, and its lease expires all the same.
  auto first = std::async(std::launch::async, [&] { return consumer->get_meta(leased(1, 300ms, false)); });
  std::this_thread::sleep_for(100ms);
  producer->put_new("p", {int64_column("x", {7})}, ids(0, 1));
  const BatchMeta held = first.get();
  ASSERT_EQ(held.size(), 1u);
  MetaRequest waiting = fetch(1, "p", "train");
  waiting.polling = false;
  waiting.timeout = 10s;
  EXPECT_EQ(producer->get_meta(waiting).global_indexes, held.global_indexes);
}

}  // namespace
}  // namespace seqflow::test
