// when_full = wait over the wire: storage services answer a put that does
// not fit "full" at once (no worker waits) and the remote client retries
// until a clear made room, within its put's budget; what it put reads back once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/coordinating_client.h"
#include "client/sharded_storage.h"
#include "client_test_support.h"
#include "controller_test_support.h"
#include "remote_cluster.h"
#include "seqflow/client.h"
#include "seqflow/controller.h"
#include "server/service.h"
#include "storage_test_support.h"
#include "transport/connection.h"
#include "transport/storage_protocol.h"
#include "transport/wire_codec.h"

namespace seqflow::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPatience = std::chrono::seconds(30);  // every wait's deadline here

StorageOptions waiting_storage(uint64_t max_samples) {
  return {.max_samples = max_samples, .when_full = WhenFull::kWait};
}

// Waits (deadline kPatience) until the units told puts to wait `answers` times in all.
bool until_told_to_wait(RemoteCluster& cluster, uint64_t answers) {
  const auto deadline = Clock::now() + kPatience;
  for (;;) {
    uint64_t told = 0;
    for (size_t u = 0; u < cluster.unit_count(); ++u) told += cluster.unit(u).storage().capacity_stats().puts_waited;
    if (told >= answers) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// The x of `count` samples a new task fetches, each once; and that no more are ready.
std::set<int64_t> values_in(Client& client, const std::string& partition, const std::string& task, int64_t count) {
  const BatchMeta meta = client.get_meta(fetch_request(partition, task, {"x"}, count));
  const std::string fields[] = {"x"};
  std::set<int64_t> out;
  for (const auto& row : client.get_data(meta, fields)) EXPECT_TRUE(out.insert(int64_of(row[0])).second);
  EXPECT_EQ(client.get_meta(fetch_request(partition, task, {"x"}, 1)).size(), 0u);
  return out;
}

TEST(RemoteCapacity, AWaitingPutLandsOnceAfterAClearMadeRoomOnEveryUnit) {
  RemoteCluster cluster(2, waiting_storage(2));
  auto client = cluster.client(kPatience);
  const BatchMeta first = client->put_new("p", {int64_column("x", {0, 1, 2, 3})}, {});  // two per unit
  auto waiting = std::async(std::launch::async, [&] { return client->put_new("p", {int64_column("x", {4, 5})}, {}); });
  ASSERT_TRUE(until_told_to_wait(cluster, 1));
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  // One sample off each unit (global indexes 0 and 1: gi % 2).
  const std::vector<int64_t> cleared(first.global_indexes.begin(), first.global_indexes.begin() + 2);
  client->clear_samples("p", cleared, {});
  ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(waiting.get().size(), 2u);
  EXPECT_EQ(values_in(*client, "p", "reader", 4), (std::set<int64_t>{2, 3, 4, 5}));
  for (size_t u = 0; u < cluster.unit_count(); ++u) {
    EXPECT_EQ(cluster.unit(u).storage().stats().samples, 2u);
    EXPECT_EQ(cluster.unit(u).storage().capacity_stats().waiting_puts, 0u);  // none holds a place now
  }
}

TEST(RemoteCapacity, AWaitingPutRaisesAtItsBudgetAndLeavesNothing) {
  RemoteCluster cluster(1, waiting_storage(2));
  cluster.client(kPatience);  // once the unit has registered: the short budget below is the put's alone
  auto client = cluster.client(std::chrono::milliseconds(400));
  client->put_new("p", {int64_column("x", {0, 1})}, {});
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { client->put_new("p", {int64_column("x", {9})}, {}); },
                           {"storage full: max_samples is 2", "the put waited", "its timeout"}));
  EXPECT_EQ(values_in(*client, "p", "reader", 2), (std::set<int64_t>{0, 1}));
  EXPECT_EQ(cluster.unit(0).storage().stats().samples, 2u);
  // It gave its place in line up as it gave up, not a lapse later.
  EXPECT_EQ(cluster.unit(0).storage().capacity_stats().waiting_puts, 0u);
}

// A client whose data lives on one storage unit, embedded or remote (one
// in-process service), and that unit.
struct OnOneUnit {
  const char* mode;
  std::shared_ptr<RemoteCluster> cluster;  // remote
  std::shared_ptr<StorageUnit> embedded;
  std::shared_ptr<Client> client;

  const StorageUnit& unit() const { return embedded ? *embedded : cluster->unit(0).storage(); }
  // Waits (deadline kPatience) until the unit has told waiting puts "no room" `answers` times.
  bool until_full_answers(uint64_t answers) const {
    const auto deadline = Clock::now() + kPatience;
    while (unit().capacity_stats().full_answers < answers) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
};

std::vector<OnOneUnit> both_modes(uint64_t max_samples) {
  StorageOptions options = waiting_storage(max_samples);
  options.wait_timeout = kPatience;
  auto cluster = std::make_shared<RemoteCluster>(1, options);
  auto unit = std::make_shared<StorageUnit>(options);
  auto embedded = std::make_shared<CoordinatingClient>(std::make_shared<Controller>(ControllerOptions{}), unit,
                                                       ReleasedData::kDroppedByClient);
  return {{"remote", cluster, nullptr, cluster->client(kPatience)}, {"embedded", nullptr, unit, embedded}};
}

// A put waits without the client's lock: the clear that makes room may come
// from the same client (one client shared by a producer and a consumer thread).
TEST(RemoteCapacity, TheSameClientsClearMakesRoomInEitherMode) {
  for (const OnOneUnit& on : both_modes(2)) {
    SCOPED_TRACE(on.mode);
    Client& client = *on.client;
    const BatchMeta first = client.put_new("p", {int64_column("x", {0, 1})}, {});
    auto waiting = std::async(std::launch::async, [&] { return client.put_new("p", {int64_column("x", {7})}, {}); });
    ASSERT_TRUE(on.until_full_answers(1));
    client.clear_samples("p", std::vector<int64_t>{first.global_indexes[0]}, {});
    ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
    EXPECT_EQ(waiting.get().size(), 1u);
    EXPECT_EQ(values_in(client, "p", "reader", 2), (std::set<int64_t>{1, 7}));
  }
}

// While a put waits, the client's other calls run. A clear of the put's own
// samples (here: of its whole partition) ends it storing nothing, instead
// of leaving its bytes under freed indexes.
TEST(RemoteCapacity, AClearOfTheWaitingPutsOwnSamplesEndsItStoringNothing) {
  for (const OnOneUnit& on : both_modes(2)) {
    SCOPED_TRACE(on.mode);
    Client& client = *on.client;
    client.put_new("p", {int64_column("x", {0, 1})}, {});
    auto waiting = std::async(std::launch::async, [&] { return client.put_new("p", {int64_column("x", {7})}, {}); });
    ASSERT_TRUE(on.until_full_answers(1));
    client.clear_partition("p");  // also releases the samples the waiting put was given
    ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
    EXPECT_TRUE(throws_error(ErrorCode::kStaleSample, [&] { waiting.get(); },
                             {"a clear released the put's samples while it waited for room", "nothing was stored"}));
    EXPECT_EQ(on.unit().stats().samples, 0u);
  }
}

// A checkpoint loaded while a put waits replaces the samples it was given:
// the put ends storing nothing, and the loaded content is all there is.
TEST(RemoteCapacity, ACheckpointLoadedDuringTheWaitEndsThePutStoringNothing) {
  for (const OnOneUnit& on : both_modes(2)) {
    SCOPED_TRACE(on.mode);
    Client& client = *on.client;
    TempDir dir;
    const std::string checkpoint = dir.file("checkpoint");
    client.put_new("p", {int64_column("x", {0})}, {});
    client.save_checkpoint(checkpoint, Value::object());
    client.put_new("p", {int64_column("x", {1})}, {});
    auto waiting = std::async(std::launch::async, [&] { return client.put_new("p", {int64_column("x", {7})}, {}); });
    ASSERT_TRUE(on.until_full_answers(1));
    client.load_checkpoint(checkpoint);  // one sample: room for the put, but not its samples
    ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
    EXPECT_TRUE(throws_error(ErrorCode::kStaleSample, [&] { waiting.get(); },
                             {"a checkpoint was loaded while the put waited for room", "nothing was stored"}));
    EXPECT_EQ(on.unit().stats().samples, 1u);
    EXPECT_EQ(values_in(client, "p", "reader", 1), (std::set<int64_t>{0}));
  }
}

// A waiting put asks its unit whether it fits (without its values) before
// it sends them again: however often it asks, its values cross twice.
TEST(RemoteCapacity, AWaitingPutSendsItsValuesOnlyWhenTheyFit) {
  RemoteCluster cluster(1, waiting_storage(2));
  auto client = cluster.client(kPatience, /*local_copy=*/false);
  const auto received = [&] {
    return cluster.unit(0).metrics().counter("seqflow_storage_put_bytes_total", "").value();
  };
  const BatchMeta first = client->put_new("p", {int64_column("x", {0, 1})}, {});
  const double first_bytes = received();
  ASSERT_GT(first_bytes, 0.0);
  auto waiting = std::async(std::launch::async, [&] { return client->put_new("p", {int64_column("x", {7})}, {}); });
  // Asked again and again: a first "full" answer, then probes.
  ASSERT_TRUE(until_told_to_wait(cluster, 5));
  EXPECT_EQ(received(), first_bytes * 1.5);  // its one try so far: one sample's bytes
  client->clear_samples("p", std::vector<int64_t>{first.global_indexes[0]}, {});
  ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(waiting.get().size(), 1u);
  EXPECT_EQ(received(), first_bytes * 2);  // and the try that fit
  EXPECT_EQ(values_in(*client, "p", "reader", 2), (std::set<int64_t>{1, 7}));
}

// Another client's small puts queue behind a big waiting put instead of
// taking the room it waits for, each clear after another.
TEST(RemoteCapacity, ABigWaitingPutIsNotStarvedByAnotherClientsSmallOnes) {
  RemoteCluster cluster(1, waiting_storage(4));
  auto consumer = cluster.client(kPatience);
  auto big_producer = cluster.client(kPatience);
  auto small_producer = cluster.client(kPatience);
  const BatchMeta first = consumer->put_new("p", {int64_column("x", {0, 1, 2, 3})}, {});
  auto big = std::async(std::launch::async, [&] {
    return big_producer->put_new("q", {int64_column("x", {10, 11, 12})}, {});
  });
  ASSERT_TRUE(until_told_to_wait(cluster, 1));
  consumer->clear_samples("p", std::vector<int64_t>{first.global_indexes[0]}, {});  // room for one
  auto small =
      std::async(std::launch::async, [&] { return small_producer->put_new("q", {int64_column("x", {20})}, {}); });
  // The small put is answered "full" too, and holds a place behind the big one.
  const auto deadline = Clock::now() + kPatience;
  while (cluster.unit(0).storage().capacity_stats().waiting_puts < 2 &&
         small.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
    ASSERT_LT(Clock::now(), deadline);
  }
  EXPECT_NE(small.wait_for(std::chrono::milliseconds(0)), std::future_status::ready)
      << "the small put took the room the big one waits for";
  const std::vector<int64_t> more(first.global_indexes.begin() + 1, first.global_indexes.begin() + 3);
  consumer->clear_samples("p", more, {});  // room for the big put
  ASSERT_EQ(big.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(big.get().size(), 3u);
  consumer->clear_samples("p", std::vector<int64_t>{first.global_indexes[3]}, {});
  ASSERT_EQ(small.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(small.get().size(), 1u);
  EXPECT_EQ(values_in(*consumer, "q", "reader", 4), (std::set<int64_t>{10, 11, 12, 20}));
}

// A peer that speaks the wire asks `room` for made-up puts and for every
// identity around another client's waiting put, and tells them all to leave
// the line: the unit stores and frees nothing for it, and the waiting put
// still lands once, with its own value, when room is made.
TEST(RemoteCapacity, AHostilePeersRoomCallsStoreAndFreeNothing) {
  RemoteCluster cluster(1, waiting_storage(2));
  auto client = cluster.client(kPatience);
  const BatchMeta first = client->put_new("p", {int64_column("x", {0, 1})}, {});
  auto waiting = std::async(std::launch::async, [&] { return client->put_new("p", {int64_column("x", {7})}, {}); });
  ASSERT_TRUE(until_told_to_wait(cluster, 1));
  StorageUnit& storage = cluster.unit(0).storage();
  const StorageStats before = storage.stats();
  zmq::context_t context;
  transport::Connection peer(context, cluster.unit(0).endpoint(),
                             transport::ConnectionOptions{.timeout = std::chrono::seconds(10), .security = {}});
  const auto ask = [&](const StorageUnit::RetriedPut& put, bool leave) {
    return transport::storage_protocol::decode_room_reply(
        peer.call(transport::storage_protocol::kRoom, transport::storage_protocol::encode_room_request({put, leave})));
  };
  // Made up: no such put holds a place.
  for (const StorageUnit::RetriedPut& made_up :
       {StorageUnit::RetriedPut{1000, 1, 0, 1}, StorageUnit::RetriedPut{-1, 0, 0, 1},
        StorageUnit::RetriedPut{2, 999999, 7, 1u << 30}}) {
    EXPECT_FALSE(ask(made_up, false).placed);
  }
  // Every identity the waiting put (the next index and one of the next
  // generations, one sample) may have.
  bool found_it = false;
  const uint64_t last_generation = first.generations.back();
  for (uint64_t generation = last_generation + 1; generation <= last_generation + 4; ++generation) {
    for (uint64_t version = 0; version <= 2; ++version) {
      const StorageUnit::RetriedPut guess{first.global_indexes.back() + 1, generation, version, 1};
      if (ask(guess, false).placed) {
        found_it = true;
        EXPECT_TRUE(ask(guess, true).full == std::nullopt);  // told to leave
      }
    }
  }
  EXPECT_TRUE(found_it) << "no guess named the waiting put: the test did not reach another client's put";
  const StorageStats after = storage.stats();
  EXPECT_EQ(after.samples, before.samples);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_NE(waiting.wait_for(std::chrono::milliseconds(0)), std::future_status::ready) << "the put landed without room";
  client->clear_samples("p", std::vector<int64_t>{first.global_indexes[0]}, {});
  ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(waiting.get().size(), 1u);
  EXPECT_EQ(values_in(*client, "p", "reader", 2), (std::set<int64_t>{1, 7}));
}

// A storage unit as it was before the `room` operation: puts only, each
// stored all or nothing or answered "full" (when_full = wait).
class UnitWithoutRoom {
 public:
  explicit UnitWithoutRoom(uint64_t max_samples) : storage_(waiting_storage(max_samples)), service_({}) {
    service_.handle(transport::storage_protocol::kPut, [this](transport::Frames& args) {
      ++puts_;
      const auto request = transport::storage_protocol::decode_put_request(args);
      const auto columns =
          transport::wire::take_columns(request.columns, args, 1, request.samples.global_indexes.size(), "put");
      return transport::storage_protocol::encode_put_reply(
          {std::nullopt, storage_.try_put(request.samples.keys(), columns)});
    });
    service_.start();
  }
  StorageUnit& storage() { return storage_; }
  std::string endpoint() const { return service_.endpoint(); }
  int64_t puts() const { return puts_; }
  // Requests it refused as an operation it does not know (`room`).
  double unknown_operations() {
    return service_.metrics().counter("seqflow_rejected_requests_total", "", {{"reason", "unknown_op"}}).value();
  }

 private:
  std::atomic<int64_t> puts_{0};
  StorageUnit storage_;
  server::Service service_;
};

// A waiting put meets a unit that answers `room` with "unknown operation":
// it sends its values again, as to every unit before `room`, and lands once.
TEST(RemoteCapacity, AWaitingPutResendsItsValuesToAUnitThatPredatesRoom) {
  UnitWithoutRoom unit(1);
  auto context = std::make_shared<zmq::context_t>();
  const transport::ConnectionOptions options{.timeout = kPatience, .security = {}};
  auto pool = std::make_shared<transport::ConnectionPool>(context, unit.endpoint(), options);
  ShardedStorage storage({pool}, pool, /*local_copy=*/false);
  const PartitionIdList partitions(1, "p");
  const int64_t first_index[] = {0}, second_index[] = {1};
  const uint64_t generations[] = {1};
  storage.put(SampleKeys{first_index, partitions, generations}, {int64_column("x", {5})});
  auto waiting = std::async(std::launch::async, [&] {
    storage.put(SampleKeys{second_index, partitions, generations}, {int64_column("x", {6})});
  });
  const auto deadline = Clock::now() + kPatience;
  while (unit.storage().capacity_stats().full_answers < 3) {  // its first try, and tries after "unknown operation"
    ASSERT_LT(Clock::now(), deadline) << "the put stopped asking";
    ASSERT_NE(waiting.wait_for(std::chrono::milliseconds(1)), std::future_status::ready) << "it landed without room";
  }
  unit.storage().clear(first_index);
  ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
  waiting.get();  // rethrows a failure
  const std::string fields[] = {"x"};
  const auto rows = unit.storage().get(SampleKeys{second_index, partitions, generations}, fields);
  EXPECT_EQ(int64_of(rows.at(0).at(0)), 6);
  EXPECT_EQ(unit.storage().stats().samples, 1u);
  // Asked `room` once: a unit that does not know it is not asked again.
  EXPECT_EQ(unit.unknown_operations(), 1.0);
  // Every put after the first was answered "full" but the one that landed.
  EXPECT_EQ(unit.puts(), 1 + static_cast<int64_t>(unit.storage().capacity_stats().full_answers) + 1);
}

TEST(RemoteCapacity, OtherCallsAreServedWhilePutsWait) {
  RemoteCluster cluster(1, waiting_storage(1));
  auto client = cluster.client(kPatience);
  client->put_new("p", {int64_column("x", {0})}, {});
  // More waiting puts than the unit has workers at least: none holds one.
  constexpr int kWaiting = 8;
  std::vector<std::future<BatchMeta>> waiting;
  std::vector<std::shared_ptr<Client>> producers;
  for (int i = 0; i < kWaiting; ++i) {
    producers.push_back(cluster.client(kPatience));
    waiting.push_back(std::async(std::launch::async, [&producer = *producers.back(), i] {
      return producer.put_new("q", {int64_column("x", {100 + i})}, {});
    }));
  }
  // Each holds its place in line on the unit.
  const auto deadline_waiting = Clock::now() + kPatience;
  while (cluster.unit(0).storage().capacity_stats().waiting_puts < static_cast<uint64_t>(kWaiting)) {
    ASSERT_LT(Clock::now(), deadline_waiting);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(values_in(*client, "p", "reader", 1), (std::set<int64_t>{0}));  // reads go on
  // Each clear makes room for one waiting put; the consumer clears what lands.
  std::set<int64_t> landed;
  const auto deadline = Clock::now() + kPatience;
  client->clear_partition("p");
  while (landed.size() < kWaiting && Clock::now() < deadline) {
    const BatchMeta meta = client->get_meta(fetch_request("q", "consumer", {"x"}, 1));
    if (meta.size() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    const std::string fields[] = {"x"};
    EXPECT_TRUE(landed.insert(int64_of(client->get_data(meta, fields)[0][0])).second);
    client->clear_samples("q", meta.global_indexes, meta.generations);
  }
  for (auto& put : waiting) {
    ASSERT_EQ(put.wait_for(kPatience), std::future_status::ready);
    EXPECT_EQ(put.get().size(), 1u);
  }
  EXPECT_EQ(landed.size(), static_cast<size_t>(kWaiting));
}

}  // namespace
}  // namespace seqflow::test
