// The controller and storage services under concurrent peers: one peer
// sending garbage does not disturb another's puts, fetches and clears.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "eventually.h"
#include "remote_cluster.h"
#include "remote_service_test_support.h"
#include "service_test_support.h"
#include "storage_test_support.h"
#include "transport/connection.h"
#include "seqflow/error.h"
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

// A blocking fetch whose client gave up is not served later: the samples
// that arrive afterwards go to the next fetch, not to nobody.
TEST(RemoteServiceDeadlines, AFetchWhoseClientGaveUpConsumesNothingThatArrivesLater) {
  RemoteCluster cluster(1);
  auto client = cluster.client();
  // A client that waits 300 ms for the reply of a fetch that asks the
  // controller to wait 20 s for data (as one whose process died would).
  MetaRequest waiting = fetch(2, "p", "train");
  waiting.polling = false;
  waiting.timeout = 20s;
  zmq::context_t context;
  transport::Connection impatient(context, cluster.controller_endpoint(),
                                  transport::ConnectionOptions{.timeout = 300ms, .security = {}});
  EXPECT_TRUE(throws_error(
      ErrorCode::kTimeout,
      [&] {
        impatient.call("get_meta", transport::wire::header_message(transport::wire::meta_request_frame(waiting)));
      },
      {}));
  // The controller counts its deadline from when the request arrived, so on a
  // slow machine it may still wait a moment after the client gave up: put only
  // once it has answered the abandoned fetch (with a timeout), which a
  // controller that waited the asked-for 20 s would not do in time.
  const auto abandoned_fetches_answered = [&] {
    return cluster.controller().metrics().counter("seqflow_request_errors_total", "", {{"op", "get_meta"}}).value();
  };
  ASSERT_TRUE(eventually([&] { return abandoned_fetches_answered() >= 1.0; }, 5s))
      << "the controller still waits on behalf of a client that gave up";
  client->put_new("p", {int64_column("x", {7, 8})}, ids(7, 2));
  MetaRequest next = fetch(2, "p", "train");
  next.polling = false;
  next.timeout = 5s;
  EXPECT_EQ(ids_of(client->get_meta(next)), (std::vector<int64_t>{7, 8}));
}

// A clear whose client gave up while it waited behind another clear does
// not run afterwards.
TEST(RemoteServiceDeadlines, AClearWhoseClientGaveUpWhileItWaitedDoesNotRunLater) {
  server::ControllerServiceOptions options;
  options.storage_timeout = 1500ms;
  options.storage_silence_limit = 10s;
  RemoteCluster cluster(1, {}, options);
  auto client = cluster.client();
  const BatchMeta kept = client->put_new("p", {int64_column("x", {1, 2})}, ids(1, 2));
  client->put_new("slow", {int64_column("x", {3})}, ids(3, 1));
  cluster.stop_unit(0);  // dropping "slow"'s data now waits for the unit's timeout, holding the clears' gate
  std::jthread slow_clear([&] {
    try {
      cluster.client()->clear_partition("slow");
    } catch (const Error&) {
      // the unit is gone: the drop fails, counted, not fatal
    }
  });
  std::this_thread::sleep_for(200ms);  // the slow clear holds the gate by now (it waits 1.5 s)
  EXPECT_TRUE(throws_error(ErrorCode::kTimeout, [&] { cluster.client(300ms)->clear_partition("p"); }, {}));
  slow_clear.join();
  std::this_thread::sleep_for(200ms);  // room for the abandoned clear, had it run
  const std::string fields[] = {"x"};
  const auto status = client->control().production_status(fields, "p");
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->global_indexes, kept.global_indexes) << "the abandoned clear_partition ran";
  EXPECT_GE(
      cluster.controller().metrics().counter("seqflow_request_errors_total", "", {{"op", "clear_partition"}}).value(),
      1.0);
}

// Checkpoints saved while other clients put and clear are each one cut:
// every sample a restored controller calls produced has its own data (its
// value is its id), never none and never a later sample's.
TEST(RemoteServiceCheckpoints, ACheckpointTakenUnderLivePutsAndClearsIsOneCut) {
  RemoteCluster cluster(2);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> next_id{0};
  const auto put_and_clear = [&] {
    auto client = cluster.client();
    while (!stop) {
      const int64_t id = next_id.fetch_add(2);
      const BatchMeta put = client->put_new("p", {int64_column("x", {id, id + 1})}, ids(id, 2));
      if (id % 4 == 0) client->clear_samples("p", put.global_indexes, put.generations);  // indexes get reused
    }
  };
  std::vector<std::jthread> writers;
  for (int w = 0; w < 2; ++w) writers.emplace_back(put_and_clear);
  TempDir dir;
  auto client = cluster.client();
  const auto started = std::chrono::steady_clock::now();
  while (next_id < 40 && std::chrono::steady_clock::now() - started < 20s) std::this_thread::sleep_for(1ms);
  constexpr int kCheckpoints = 12;
  for (int c = 0; c < kCheckpoints; ++c) {
    client->save_checkpoint(dir.file("c" + std::to_string(c)), Value::object());
  }
  stop = true;
  writers.clear();
  const std::string fields[] = {"x"};
  for (int c = 0; c < kCheckpoints; ++c) {
    SCOPED_TRACE("checkpoint " + std::to_string(c));
    client->load_checkpoint(dir.file("c" + std::to_string(c)));
    const auto status = client->control().production_status(fields, "p");
    ASSERT_TRUE(status.has_value());
    MetaRequest all = fetch(0, "p", "check");
    all.mode = MetaMode::kForceFetch;
    const BatchMeta every = client->get_meta(all);
    BatchMeta produced;
    for (size_t i = 0; i < every.size(); ++i) {
      const auto at =
          std::lower_bound(status->global_indexes.begin(), status->global_indexes.end(), every.global_indexes[i]);
      if (at == status->global_indexes.end() || !status->has(at - status->global_indexes.begin(), 0)) continue;
      produced.global_indexes.push_back(every.global_indexes[i]);
      produced.generations.push_back(every.generations[i]);
      produced.partition_ids.push_back("p");
      produced.custom_meta.push_back(every.custom_meta[i]);
    }
    EXPECT_EQ(values_of(*client, produced), ids_of(produced));
  }
}

}  // namespace
}  // namespace seqflow::test
