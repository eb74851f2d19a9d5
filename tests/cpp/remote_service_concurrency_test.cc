// The controller and storage services under concurrent peers: one peer
// sending garbage does not disturb another's puts, fetches and clears.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stop_token>
#include <string>
#include <thread>

#include "remote_cluster.h"
#include "remote_service_test_support.h"
#include "service_test_support.h"
#include "storage_test_support.h"
#include "transport/connection.h"
#include "wire_test_support.h"

namespace seqflow::test {
namespace {

using namespace std::chrono_literals;

TEST(RemoteServiceConcurrency, GarbageFromOnePeerDoesNotDisturbAnother) {
  RemoteCluster cluster(1);
  auto client = cluster.client();
  std::atomic<int> answered{0};
  // Stopped and joined however the test ends (a failed ASSERT returns early).
  std::jthread garbage([&](std::stop_token stop) {
    zmq::context_t context;
    transport::Connection controller(context, cluster.controller_endpoint(),
                                     transport::ConnectionOptions{.timeout = 5s, .security = {}});
    transport::Connection storage(context, cluster.unit(0).endpoint(),
                                  transport::ConnectionOptions{.timeout = 5s, .security = {}});
    const std::string too_deep = nested_msgpack(1000);
    while (!stop.stop_requested()) {
      for (transport::Connection* target : {&controller, &storage}) {
        for (const char* op : {"insert", "get_meta", "put", "get", "clear"}) {
          try {
            target->call(op, server::test::frames_of({too_deep, "\x01"}));
          } catch (const Error& error) {
            if (error.code() != ErrorCode::kTimeout) ++answered;
          }
        }
      }
    }
  });
  for (int64_t round = 0; round < 30; ++round) {
    const BatchMeta put = client->put_new("p", {int64_column("x", {round, round + 1})}, ids(round, 2));
    const BatchMeta meta = client->get_meta(fetch(2, "p", "train"));
    ASSERT_EQ(meta.size(), 2u);
    EXPECT_EQ(values_of(*client, meta), ids_of(meta));
    client->clear_samples("p", meta.global_indexes, {});
  }
  garbage.request_stop();
  garbage.join();
  EXPECT_GT(answered.load(), 0);
}

}  // namespace
}  // namespace seqflow::test
