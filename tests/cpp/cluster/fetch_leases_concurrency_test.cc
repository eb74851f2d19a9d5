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
#include "service_test_support.h"
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

size_t leased_on_the_controller(RemoteCluster& cluster) {
  const std::string metrics = cluster.controller().metrics().render();
  const std::string gauge = "seqflow_partition_leased{partition=\"p\",task=\"train\"} ";
  const size_t at = metrics.find(gauge);
  return at == std::string::npos ? 0 : std::stoul(metrics.substr(at + gauge.size()));
}

// The service's own thread gives an expired lease back: with no call coming
// in (the metrics read the controller without expiring anything), the lease
// ends, and a fetch already waiting is served its samples.
TEST(FetchLeasesRemote, TheServiceGivesAnExpiredLeaseBackWithNoCallComingIn) {
  RemoteCluster cluster(1);
  auto producer = cluster.client();
  auto dead = cluster.client();
  producer->put_new("p", {int64_column("x", {1, 2})}, ids(0, 2));
  const BatchMeta held = dead->get_meta(leased(2, 300ms));  // then it dies: never acknowledges
  ASSERT_EQ(held.size(), 2u);
  ASSERT_EQ(leased_on_the_controller(cluster), 2u);
  ASSERT_TRUE(server::test::holds_within_10s([&] { return leased_on_the_controller(cluster) == 0; }));
  MetaRequest waiting = fetch(2, "p", "train");
  waiting.polling = false;
  waiting.timeout = 10s;
  const BatchMeta again = producer->get_meta(waiting);
  EXPECT_EQ(again.global_indexes, held.global_indexes);
  EXPECT_EQ(values_of(*producer, again), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(end_leases(dead->control(), held, "train", false), 0u) << "a late acknowledgement ends nothing";
}

TEST(FetchLeasesRemote, AcknowledgedStaysConsumedReleasedComesBack) {
  RemoteCluster cluster(1);
  auto client = cluster.client();
  client->put_new("p", {int64_column("x", {1, 2, 3})}, ids(0, 3));
  const BatchMeta acknowledged = client->get_meta(leased(1, 200ms));
  EXPECT_EQ(end_leases(client->control(), acknowledged, "train", false), 1u);
  const BatchMeta released = client->get_meta(leased(2, 1h));
  EXPECT_EQ(leased_on_the_controller(cluster), 2u);
  EXPECT_NE(
      cluster.controller().metrics().render().find("seqflow_partition_consumed{partition=\"p\",task=\"train\"} 3\n"),
      std::string::npos);
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
  ASSERT_TRUE(server::test::holds_within_10s([&] { return leased_on_the_controller(cluster) == 0; }));
  EXPECT_EQ(producer->get_meta(fetch(1, "p", "train")).global_indexes, held.global_indexes);
}

}  // namespace
}  // namespace seqflow::test
