// Blocking fetches of the controller service wait without a thread each
// (server::DeferredWaiters): hundreds of them hold no worker, other calls
// proceed meanwhile, each is answered exactly once when data comes, and one
// whose client went away is dropped and consumes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "remote_cluster.h"
#include "remote_service_test_support.h"
#include "service_test_support.h"
#include "storage_test_support.h"
#include "transport/connection.h"
#include "transport/wire_codec.h"
#include "seqflow/error.h"

namespace seqflow::test {
namespace {

using namespace std::chrono_literals;

MetaRequest blocking_fetch(int64_t batch_size, const std::string& partition, std::chrono::milliseconds timeout) {
  MetaRequest request = fetch(batch_size, partition, "train");
  request.polling = false;
  request.timeout = timeout;
  return request;
}

transport::Frames request_frames(const MetaRequest& request) {
  return transport::wire::header_message(transport::wire::meta_request_frame(request));
}

double gauge(server::ControllerService& service, const std::string& name) {
  return service.metrics().gauge(name, "").value();
}

bool waiters_become(server::ControllerService& service, double count) {
  return server::test::holds_within_10s([&] { return gauge(service, "seqflow_requests_deferred") == count; });
}

TEST(FetchWaiters, HundredsOfWaitersHoldNoWorkerOthersProceedAndEachIsAnsweredOnce) {
  server::ControllerServiceOptions options;
  options.service.min_workers = 2;
  RemoteCluster cluster(1, {}, options);
  auto client = cluster.client();
  constexpr int kWaiters = 300;
  zmq::context_t context;
  transport::Connection waiting(context, cluster.controller_endpoint(),
                                transport::ConnectionOptions{.timeout = 30s, .security = {}});
  std::vector<uint64_t> pending;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (int w = 0; w < kWaiters; ++w) {
    pending.push_back(waiting.send("get_meta", request_frames(blocking_fetch(1, "waited", 30s)), deadline));
  }
  ASSERT_TRUE(waiters_become(cluster.controller(), kWaiters));
  EXPECT_LE(gauge(cluster.controller(), "seqflow_service_workers"), 4.0) << "waiters hold worker threads";

  // Meanwhile: a clear, a checkpoint and a fetch whose data is there, each
  // answered within the client's 20 s timeout (a timeout throws) while
  // every waiter still waits (for 30 s).
  client->put_new("other", {int64_column("x", {1, 2})}, ids(1, 2));
  EXPECT_EQ(ids_of(client->get_meta(blocking_fetch(2, "other", 5s))), (std::vector<int64_t>{1, 2}));
  client->clear_partition("other");
  TempDir dir;
  client->save_checkpoint(dir.file("during"), Value::object());
  EXPECT_EQ(gauge(cluster.controller(), "seqflow_requests_deferred"), kWaiters) << "answered after the waiters";

  // Data for every waiter, in a few puts: each sample goes to one of them.
  for (int64_t first = 0; first < kWaiters; first += 50) {
    std::vector<int64_t> values(50);
    for (int64_t i = 0; i < 50; ++i) values[i] = first + i;
    client->put_new("waited", {int64_column("x", values)}, ids(first, 50));
  }
  std::multiset<int64_t> served;
  for (uint64_t id : pending) {
    const BatchMeta meta = transport::wire::read_batch_meta(waiting.receive(id, deadline), 0, "reply");
    ASSERT_EQ(meta.size(), 1u);
    served.insert(ids_of(meta).front());
  }
  std::multiset<int64_t> expected;
  for (int64_t i = 0; i < kWaiters; ++i) expected.insert(i);
  EXPECT_EQ(served, expected);
  EXPECT_EQ(gauge(cluster.controller(), "seqflow_requests_deferred"), 0.0);
}

TEST(FetchWaiters, AWaiterWhoseClientDisconnectedIsDroppedAndConsumesNothing) {
  RemoteCluster cluster(1);
  auto client = cluster.client();
  {
    zmq::context_t context;
    transport::Connection leaving(context, cluster.controller_endpoint(),
                                  transport::ConnectionOptions{.timeout = 60s, .security = {}});
    (void)leaving.send("get_meta", request_frames(blocking_fetch(2, "p", 60s)), std::chrono::steady_clock::now() + 60s);
    ASSERT_TRUE(waiters_become(cluster.controller(), 1));
  }  // the connection closes, as a killed process's would
  ASSERT_TRUE(waiters_become(cluster.controller(), 0)) << "a waiter outlived its client";
  EXPECT_EQ(cluster.controller().metrics().counter("seqflow_deferred_clients_gone_total", "").value(), 1.0);
  client->put_new("p", {int64_column("x", {5, 6})}, ids(5, 2));
  EXPECT_EQ(ids_of(client->get_meta(blocking_fetch(2, "p", 5s))), (std::vector<int64_t>{5, 6}));
}

// The client leaves and the data comes at once: the waiter is either
// dropped first or answered into a closed connection, whose reply the
// router refuses; either way the batch goes to the next fetch.
TEST(FetchWaiters, ABatchAnsweredToAClientThatLeftGoesToTheNextFetch) {
  RemoteCluster cluster(1);
  auto client = cluster.client();
  for (int64_t round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    {
      zmq::context_t context;
      transport::Connection leaving(context, cluster.controller_endpoint(),
                                    transport::ConnectionOptions{.timeout = 60s, .security = {}});
      (void)leaving.send("get_meta", request_frames(blocking_fetch(2, "p", 60s)),
                         std::chrono::steady_clock::now() + 60s);
      ASSERT_TRUE(waiters_become(cluster.controller(), 1));
    }
    client->put_new("p", {int64_column("x", {2 * round, 2 * round + 1})}, ids(2 * round, 2));
    EXPECT_EQ(ids_of(client->get_meta(blocking_fetch(2, "p", 10s))), (std::vector<int64_t>{2 * round, 2 * round + 1}));
    ASSERT_TRUE(waiters_become(cluster.controller(), 0));
  }
}

TEST(FetchWaiters, AWaiterTimesOutAtItsDeadlineNamingWhatItWaitedFor) {
  RemoteCluster cluster(1);
  auto client = cluster.client();
  try {
    client->get_meta(blocking_fetch(2, "never", 300ms));
    FAIL() << "the fetch did not time out";
  } catch (const Error& error) {
    // Ended by the waiter's own deadline (the controller's answer), before
    // the client's call timeout, which is only the test's deadline.
    EXPECT_EQ(error.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(error.what()).find("get_meta timed out after"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("partition 'never'"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(waiters_become(cluster.controller(), 0));
}

}  // namespace
}  // namespace seqflow::test
