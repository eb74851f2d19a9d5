// The controller service's watch op: answered at once when changes are
// there, else a waiter holding no thread (DeferredWaiters), woken by a
// change, answered at its deadline, dropped when its client leaves; bad
// requests over the wire are refused naming the field.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "controller_test_support.h"
#include "error_matchers.h"
#include "remote_cluster.h"
#include "remote_service_test_support.h"
#include "service_test_support.h"
#include "transport/connection.h"
#include "transport/control_protocol.h"
#include "seqflow/error.h"
#include "seqflow/watch.h"

namespace seqflow::test {
namespace {

using namespace std::chrono_literals;
namespace control = transport::control;

WatchRequest watching(uint64_t cursor, std::chrono::milliseconds wait, WatchFilter filter = {}) {
  return watch_request("p", cursor, wait, std::move(filter));
}

bool waiters_become(server::ControllerService& service, double count) {
  return server::test::holds_within_10s(
      [&] { return service.metrics().gauge("seqflow_requests_deferred", "").value() == count; });
}

TEST(WatchWaiters, AWaitingWatchHoldsNoThreadAndIsWokenByATagChange) {
  RemoteCluster cluster(1);
  auto watcher = cluster.client();
  auto writer = cluster.client();
  const uint64_t cursor = watcher->control().watch(watching(0, 0ms)).cursor;
  auto watch = std::async(std::launch::async, [&] {
    return watcher->control().watch(watching(cursor, 60s, WatchFilter{"", "status"}));
  });
  ASSERT_TRUE(waiters_become(cluster.controller(), 1)) << "the watch did not become a waiter";
  const Value finished{{"status", "finished"}};
  writer->kv_put("p", std::vector<std::string>{"u"}, std::vector<Value>{finished}, {});
  ASSERT_EQ(watch.wait_for(30s), std::future_status::ready) << "the change did not wake the waiter";
  const WatchBatch batch = watch.get();
  ASSERT_FALSE(batch.changes.empty());
  EXPECT_EQ(batch.changes[0].key, "u");
  EXPECT_EQ(batch.changes[0].tag, finished);
  EXPECT_TRUE(waiters_become(cluster.controller(), 0));
}

TEST(WatchWaiters, AWaiterIsAnsweredAtItsDeadlineWithNoChange) {
  RemoteCluster cluster(1);
  auto client = cluster.client();
  const uint64_t cursor = client->control().watch(watching(0, 0ms)).cursor;
  const WatchBatch batch = client->control().watch(watching(cursor, 200ms));
  EXPECT_TRUE(batch.changes.empty());
  EXPECT_FALSE(batch.resync);
  EXPECT_TRUE(waiters_become(cluster.controller(), 0));
  // Its cursor misses nothing.
  const BatchMeta made = client->kv_put("p", std::vector<std::string>{"k"}, {}, {});
  const WatchBatch next = client->control().watch(watching(batch.cursor, 0ms));
  ASSERT_EQ(next.changes.size(), 1u);
  EXPECT_EQ(next.changes[0].global_index, made.global_indexes[0]);
}

TEST(WatchWaiters, AWaiterWhoseClientDisconnectedIsDropped) {
  RemoteCluster cluster(1);
  auto client = cluster.client();
  const uint64_t cursor = client->control().watch(watching(0, 0ms)).cursor;
  {
    zmq::context_t context;
    transport::Connection leaving(context, cluster.controller_endpoint(),
                                  transport::ConnectionOptions{.timeout = 60s, .security = {}});
    (void)leaving.send(control::kWatch, control::encode_watch_request(watching(cursor, 60s)),
                       std::chrono::steady_clock::now() + 60s);
    ASSERT_TRUE(waiters_become(cluster.controller(), 1));
  }  // the connection closes, as a killed process's would
  ASSERT_TRUE(waiters_become(cluster.controller(), 0)) << "a waiter outlived its client";
  EXPECT_EQ(cluster.controller().metrics().counter("seqflow_deferred_clients_gone_total", "").value(), 1.0);
}

TEST(WatchWaiters, BadRequestsOverTheWireAreRefusedNamingTheField) {
  RemoteCluster cluster(1);
  zmq::context_t context;
  transport::Connection connection(context, cluster.controller_endpoint(),
                                   transport::ConnectionOptions{.timeout = 10s, .security = {}});
  const auto refused = [&](WatchRequest request, std::initializer_list<std::string_view> fragments) {
    return throws_invalid(
        [&] {
          const auto deadline = std::chrono::steady_clock::now() + 10s;
          connection.receive(connection.send(control::kWatch, control::encode_watch_request(request), deadline),
                             deadline);
        },
        fragments);
  };
  WatchRequest request = watching(0, 0ms);
  request.max_changes = kMaxWatchChanges + 1;
  EXPECT_TRUE(refused(request, {"max_changes"}));
  request = watching(0, kMaxWatchWait + 1ms);
  EXPECT_TRUE(refused(request, {"wait"}));
  request = watching(uint64_t{1} << 62, 0ms);
  EXPECT_TRUE(refused(request, {"cursor", "never handed out"}));
  request = watching(0, 0ms, WatchFilter{std::string(kMaxNameBytes + 1, 'k'), ""});
  EXPECT_TRUE(refused(request, {"key_prefix"}));
}

}  // namespace
}  // namespace seqflow::test
