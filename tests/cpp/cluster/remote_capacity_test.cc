// when_full = wait over the wire: storage services answer a put that does
// not fit "full" at once (no worker waits) and the remote client retries
// until a clear made room, within its put's budget; what it put reads back once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
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
#include "transport/storage_routing.h"
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
    for (size_t u = 0; u < cluster.unit_count(); ++u) told += cluster.unit(u).storage().capacity_stats().full_answers;
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

// Values first, first + 1, ... (`count` of them).
std::vector<int64_t> values_from(int64_t first, int64_t count) {
  std::vector<int64_t> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) values[static_cast<size_t>(i)] = first + i;
  return values;
}

TEST(RemoteCapacity, AWaitingPutLandsOnceAfterAClearMadeRoomOnEveryUnit) {
  constexpr int64_t kBlock = transport::kPlacementBlock;  // a block per unit fills it
  RemoteCluster cluster(2, waiting_storage(kBlock));
  auto client = cluster.client(kPatience);
  // Global indexes 0 to 2 blocks: a block on each unit.
  const BatchMeta first = client->put_new("p", {int64_column("x", values_from(0, 2 * kBlock))}, {});
  // A block on unit 0 and one sample on unit 1: it waits for both.
  auto waiting = std::async(std::launch::async, [&] {
    return client->put_new("p", {int64_column("x", values_from(2 * kBlock, kBlock + 1))}, {});
  });
  ASSERT_TRUE(until_told_to_wait(cluster, 1));
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  // Room for it on each unit: unit 0's block and the first sample of unit 1's.
  const std::vector<int64_t> cleared(first.global_indexes.begin(), first.global_indexes.begin() + kBlock + 1);
  client->clear_samples("p", cleared, {});
  ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(waiting.get().size(), static_cast<size_t>(kBlock + 1));
  const std::vector<int64_t> kept = values_from(kBlock + 1, 2 * kBlock);
  EXPECT_EQ(values_in(*client, "p", "reader", 2 * kBlock), std::set<int64_t>(kept.begin(), kept.end()));
  for (size_t u = 0; u < cluster.unit_count(); ++u) {
    EXPECT_EQ(cluster.unit(u).storage().stats().samples, static_cast<uint64_t>(kBlock));
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
// identity around another client's waiting put, without its ticket, and
// tells them all to leave the line: the unit stores, frees and moves
// nothing for it. The put it aimed at keeps its place ahead of a later
// one: it lands first, once, with its own value, when room is made.
TEST(RemoteCapacity, AHostilePeerWithoutTheTicketNeitherStoresNorFreesNorMovesAWaitingPut) {
  RemoteCluster cluster(1, waiting_storage(2));
  auto consumer = cluster.client(kPatience);
  auto first_producer = cluster.client(kPatience);
  auto later_producer = cluster.client(kPatience);
  const BatchMeta first = consumer->put_new("p", {int64_column("x", {0, 1})}, {});
  auto aimed_at =
      std::async(std::launch::async, [&] { return first_producer->put_new("p", {int64_column("x", {7})}, {}); });
  ASSERT_TRUE(until_told_to_wait(cluster, 1));
  auto later =
      std::async(std::launch::async, [&] { return later_producer->put_new("p", {int64_column("x", {8})}, {}); });
  StorageUnit& storage = cluster.unit(0).storage();
  const auto deadline = Clock::now() + kPatience;
  while (storage.capacity_stats().waiting_puts < 2) {
    ASSERT_LT(Clock::now(), deadline) << "the later put holds no place";
    ASSERT_NE(later.wait_for(std::chrono::milliseconds(1)), std::future_status::ready) << "it landed without room";
  }
  const StorageStats before = storage.stats();
  zmq::context_t context;
  transport::Connection peer(context, cluster.unit(0).endpoint(),
                             transport::ConnectionOptions{.timeout = std::chrono::seconds(10), .security = {}});
  namespace protocol = transport::storage_protocol;
  // Tickets a peer may try: none it was given.
  StorageUnit::Ticket ones;
  ones.fill(0xff);
  const StorageUnit::Ticket guesses[] = {StorageUnit::Ticket{}, ones};
  const auto ask = [&](const StorageUnit::RetriedPut& put, const StorageUnit::Ticket& ticket, bool leave) {
    return protocol::decode_room_reply(peer.call(protocol::kRoom, protocol::encode_room_request({put, ticket, leave})));
  };
  const auto refused = [](const StorageUnit::Room& room) {
    return !room.placed && !room.full && room.not_placed && room.not_placed->find("ticket") != std::string::npos;
  };
  // Made up: no such put holds a place.
  for (const StorageUnit::RetriedPut& made_up :
       {StorageUnit::RetriedPut{1000, 1, 0, 1}, StorageUnit::RetriedPut{-1, 0, 0, 1},
        StorageUnit::RetriedPut{2, 999999, 7, 1u << 30}}) {
    EXPECT_TRUE(refused(ask(made_up, guesses[0], false)));
  }
  // Every identity the first waiting put (the next index and one of the
  // next generations, one sample) may have, asked and told to leave.
  const uint64_t last_generation = first.generations.back();
  for (uint64_t generation = last_generation + 1; generation <= last_generation + 4; ++generation) {
    for (uint64_t version = 0; version <= 2; ++version) {
      for (const StorageUnit::Ticket& ticket : guesses) {
        const StorageUnit::RetriedPut guess{first.global_indexes.back() + 1, generation, version, 1};
        EXPECT_TRUE(refused(ask(guess, ticket, false)));
        EXPECT_TRUE(refused(ask(guess, ticket, true)));
      }
    }
  }
  EXPECT_EQ(storage.capacity_stats().waiting_puts, 2u);
  const StorageStats after = storage.stats();
  EXPECT_EQ(after.samples, before.samples);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_NE(aimed_at.wait_for(std::chrono::milliseconds(0)), std::future_status::ready) << "it landed without room";
  consumer->clear_samples("p", std::vector<int64_t>{first.global_indexes[0]}, {});  // room for one
  const auto landed = [](std::future<BatchMeta>& put) {
    return put.wait_for(std::chrono::milliseconds(1)) == std::future_status::ready;
  };
  while (!landed(aimed_at) && !landed(later)) ASSERT_LT(Clock::now(), deadline) << "neither put landed";
  EXPECT_TRUE(landed(aimed_at)) << "the put aimed at lost its place: the later one went first";
  EXPECT_FALSE(landed(later));
  consumer->clear_samples("p", std::vector<int64_t>{first.global_indexes[1]}, {});
  ASSERT_EQ(aimed_at.wait_for(kPatience), std::future_status::ready);
  ASSERT_EQ(later.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(aimed_at.get().size(), 1u);
  EXPECT_EQ(later.get().size(), 1u);
  EXPECT_EQ(values_in(*consumer, "p", "reader", 2), (std::set<int64_t>{7, 8}));
}

// A peer that guesses a put's samples and sends them first, over the
// wire, takes a place of its own and denies the put none: the put keeps
// its place in arrival order, lands once and before a later put, and sends
// its values only on its first try and on the one that fits.
TEST(RemoteCapacity, APeerThatSendsAPutsSamplesFirstDoesNotTakeItsPlace) {
  RemoteCluster cluster(1, waiting_storage(1));
  StorageUnit& unit = cluster.unit(0).storage();
  auto context = std::make_shared<zmq::context_t>();
  const transport::ConnectionOptions options{.timeout = kPatience, .security = {}};
  auto pool = std::make_shared<transport::ConnectionPool>(context, cluster.unit(0).endpoint(), options);
  ShardedStorage storage({pool}, pool, /*local_copy=*/false);
  const PartitionIdList partitions(1, "p");
  // Once every unit registered: a unit's registration clears what it held before.
  ASSERT_NE(cluster.client(kPatience), nullptr);
  const BatchMeta inserted = cluster.controller().controller().insert("p", 3);
  const int64_t held[] = {inserted.global_indexes[0]}, aimed_at[] = {inserted.global_indexes[1]},
                later_index[] = {inserted.global_indexes[2]};
  const auto keys = [&](const int64_t(&index)[1]) {
    const size_t i = &index[0] == &held[0] ? 0 : &index[0] == &aimed_at[0] ? 1 : 2;
    return SampleKeys{index, partitions, std::span<const uint64_t>(&inserted.generations[i], 1)};
  };
  const auto put = [&](const int64_t(&index)[1], int64_t value) {
    storage.put(keys(index), {int64_column("x", {value})});
  };
  const auto received = [&] {
    return cluster.unit(0).metrics().counter("seqflow_storage_put_bytes_total", "").value();
  };
  put(held, 5);
  const double one_value = received();
  ASSERT_GT(one_value, 0.0);

  namespace protocol = transport::storage_protocol;
  transport::Connection squatter(*context, cluster.unit(0).endpoint(), options);
  transport::Frames data;
  const std::string entries = transport::wire::append_columns({int64_column("x", {66})}, {}, data);
  const size_t positions[] = {0};
  const protocol::PutReply squatted = protocol::decode_put_reply(
      squatter.call(protocol::kPut, protocol::encode_put_request(keys(aimed_at), positions, entries, std::move(data))));
  ASSERT_TRUE(squatted.full.has_value() && squatted.ticket.has_value());
  const StorageUnit::RetriedPut squatted_put{aimed_at[0], inserted.generations[1], 0, 1};
  // The squatter asks with its ticket, as a client that waits: its place does not lapse.
  const auto squatter_stays = [&] {
    return protocol::decode_room_reply(
               squatter.call(protocol::kRoom, protocol::encode_room_request({squatted_put, *squatted.ticket, false})))
        .placed;
  };

  auto honest = std::async(std::launch::async, [&] { put(aimed_at, 6); });
  const auto deadline = Clock::now() + kPatience;
  // (The squatter's room probes count as full answers too: the put's own place is what is waited for.)
  while (unit.capacity_stats().waiting_puts < 2) {
    ASSERT_LT(Clock::now(), deadline) << "the put of the squatter's samples holds no place";
    ASSERT_TRUE(squatter_stays());
  }
  auto later = std::async(std::launch::async, [&] { put(later_index, 7); });
  while (unit.capacity_stats().waiting_puts < 3) {
    ASSERT_LT(Clock::now(), deadline) << "the later put holds no place, or the put aimed at none";
    ASSERT_TRUE(squatter_stays());
  }
  ASSERT_TRUE(protocol::decode_room_reply(
                  squatter.call(protocol::kRoom, protocol::encode_room_request({squatted_put, *squatted.ticket, true})))
                  .placed);

  unit.clear(held);  // room for one
  const auto landed = [](std::future<void>& put) {
    return put.wait_for(std::chrono::milliseconds(1)) == std::future_status::ready;
  };
  while (!landed(honest) && !landed(later)) ASSERT_LT(Clock::now(), deadline) << "neither put landed";
  ASSERT_TRUE(landed(honest)) << "the later put went first";
  EXPECT_FALSE(landed(later));
  honest.get();
  const std::string fields[] = {"x"};
  EXPECT_EQ(int64_of(unit.get(keys(aimed_at), fields).at(0).at(0)), 6);
  unit.clear(aimed_at);
  ASSERT_EQ(later.wait_for(kPatience), std::future_status::ready);
  later.get();
  EXPECT_EQ(int64_of(unit.get(keys(later_index), fields).at(0).at(0)), 7);
  EXPECT_EQ(unit.stats().samples, 1u);
  // Values sent: the first put, the squatter's, and two tries of each waiting put.
  EXPECT_EQ(received(), one_value * 6);
}

// A room request must name the put's ticket, of its size: otherwise the
// unit answers an error naming the key, and changes nothing.
TEST(RemoteCapacity, ARoomWithoutATicketIsAnErrorNamingIt) {
  RemoteCluster cluster(1, waiting_storage(2));
  zmq::context_t context;
  transport::Connection peer(context, cluster.unit(0).endpoint(),
                             transport::ConnectionOptions{.timeout = std::chrono::seconds(10), .security = {}});
  const auto room_with = [&](const std::optional<std::string>& ticket) {
    MsgpackMapWriter header;
    header.set("first_index").integer(0);
    header.set("first_generation").unsigned_integer(1);
    header.set("write_version").unsigned_integer(0);
    header.set("samples").unsigned_integer(1);
    if (ticket) header.set("ticket").binary(std::as_bytes(std::span(*ticket)));
    peer.call(transport::storage_protocol::kRoom, transport::wire::header_message(header));
  };
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { room_with(std::nullopt); }, {"room", "'ticket'"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { room_with(std::string(15, 'x')); },
                           {"'ticket'", "must be 16 bytes, got 15"}));
}

// A storage unit whose places in line are all held (max_waiting_puts): it
// answers a put that does not fit "full" without a ticket, and keeps it
// no place.
class UnitWithoutPlaces {
 public:
  explicit UnitWithoutPlaces(uint64_t max_samples) : storage_({.max_samples = max_samples}), service_({}) {
    service_.handle(transport::storage_protocol::kPut, [this](transport::Frames& args) {
      ++puts_;
      const auto request = transport::storage_protocol::decode_put_request(args);
      const auto columns =
          transport::wire::take_columns(request.columns, args, 1, request.samples.global_indexes.size(), "put");
      try {
        storage_.put(request.samples.keys(), columns);
      } catch (const Error& e) {
        if (!std::string_view(e.what()).starts_with("storage full")) throw;
        return transport::storage_protocol::encode_put_reply({std::nullopt, e.what(), std::nullopt});
      }
      return transport::storage_protocol::encode_put_reply({});
    });
    service_.start();
  }
  StorageUnit& storage() { return storage_; }
  std::string endpoint() const { return service_.endpoint(); }
  int64_t puts() const { return puts_; }

 private:
  std::atomic<int64_t> puts_{0};
  StorageUnit storage_;
  server::Service service_;
};

// A waiting put answered "full" without a ticket holds no place to ask
// `room` about (the unit serves no `room` here): it sends its values
// again on every try, and lands once.
TEST(RemoteCapacity, AWaitingPutWithoutAPlaceResendsItsValuesOnEveryTry) {
  UnitWithoutPlaces unit(1);
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
  while (unit.puts() < 4) {  // the first put, and three tries of the waiting one
    ASSERT_LT(Clock::now(), deadline) << "the put stopped asking";
    ASSERT_NE(waiting.wait_for(std::chrono::milliseconds(1)), std::future_status::ready) << "it landed without room";
  }
  unit.storage().clear(first_index);
  ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
  waiting.get();  // rethrows a failure (a `room` request would be one: an unknown operation)
  const std::string fields[] = {"x"};
  const auto rows = unit.storage().get(SampleKeys{second_index, partitions, generations}, fields);
  EXPECT_EQ(int64_of(rows.at(0).at(0)), 6);
  EXPECT_EQ(unit.storage().stats().samples, 1u);
}

// A unit that answers each put "full" with a new ticket (1, 2, ...: each
// try takes a new place, as when its last one lapsed) and each room request
// "not placed"; one of them fails where it is told to. It records the
// tickets of the puts that leave its line.
class UnitOfLapsingPlaces {
 public:
  enum class Fails { kNever, kRoom, kRetriedPut, kFirstPut };
  explicit UnitOfLapsingPlaces(Fails fails) : service_({}) {
    namespace protocol = transport::storage_protocol;
    service_.handle(protocol::kPut, [this, fails](transport::Frames&) {
      std::lock_guard lock(mutex_);
      if (fails == Fails::kRetriedPut && tickets_given_ > 0) throw_invalid("the unit failed the retried put");
      if (fails == Fails::kFirstPut) throw_invalid("the unit failed the first put");
      StorageUnit::Ticket ticket{};
      ticket[0] = ++tickets_given_;
      return protocol::encode_put_reply({std::nullopt, "storage full: no room", ticket});
    });
    service_.handle(protocol::kRoom, [this, fails](transport::Frames& args) {
      const protocol::RoomRequest request = protocol::decode_room_request(args);
      std::lock_guard lock(mutex_);
      if (request.leave) {
        left_.push_back(request.ticket[0]);
        return protocol::encode_room_reply({true, std::nullopt, std::nullopt});
      }
      if (fails == Fails::kRoom) throw_invalid("the unit failed room");
      return protocol::encode_room_reply({false, std::nullopt, std::string("its place lapsed")});
    });
    service_.start();
  }
  std::string endpoint() const { return service_.endpoint(); }
  // The tickets (by their first byte) of the puts that left the line.
  std::vector<uint8_t> left() {
    std::lock_guard lock(mutex_);
    return left_;
  }

 private:
  std::mutex mutex_;
  uint8_t tickets_given_ = 0;
  std::vector<uint8_t> left_;
  server::Service service_;
};

// A put of one sample to each of the two units (a data plane over them, in
// this order) that raises kInvalidArgument with `error`.
::testing::AssertionResult put_to_both_fails(UnitOfLapsingPlaces& first, UnitOfLapsingPlaces& second,
                                             const std::string& error) {
  auto context = std::make_shared<zmq::context_t>();
  const transport::ConnectionOptions options{.timeout = kPatience, .security = {}};
  std::vector<std::shared_ptr<transport::ConnectionPool>> pools;
  for (const std::string& endpoint : {first.endpoint(), second.endpoint()}) {
    pools.push_back(std::make_shared<transport::ConnectionPool>(context, endpoint, options));
  }
  ShardedStorage storage(pools, pools[0], /*local_copy=*/false);
  const PartitionIdList partitions(2, "p");
  const int64_t indexes[] = {0, transport::kPlacementBlock};  // one on each unit
  const uint64_t generations[] = {1, 1};
  return throws_error(ErrorCode::kInvalidArgument,
                      [&] {
                        storage.put(SampleKeys{indexes, partitions, generations}, {int64_column("x", {5, 6})});
                      },
                      {error});
}

// A put whose try on one unit fails gives up and leaves its places on the
// others with their newest tickets: a place taken by a try of the same
// round (its ticket in a reply that came with the failure) too.
TEST(RemoteCapacity, APutThatFailsLeavesEachLineWithItsNewestTicket) {
  for (const auto fails : {UnitOfLapsingPlaces::Fails::kRoom, UnitOfLapsingPlaces::Fails::kRetriedPut}) {
    SCOPED_TRACE(fails == UnitOfLapsingPlaces::Fails::kRoom ? "room fails" : "the retried put fails");
    UnitOfLapsingPlaces lapsing(UnitOfLapsingPlaces::Fails::kNever);
    UnitOfLapsingPlaces failing(fails);
    EXPECT_TRUE(put_to_both_fails(lapsing, failing, "the unit failed"));
    // Its first place lapsed and the retry of the same round took the second.
    EXPECT_EQ(lapsing.left(), std::vector<uint8_t>{2});
    EXPECT_EQ(failing.left(), std::vector<uint8_t>{1});
  }
}

// A put whose first try fails on one unit while another answers "full"
// leaves that unit's line at once: its place does not hold room until it lapses.
TEST(RemoteCapacity, APutWhoseFirstTryFailsLeavesTheLinesItsOtherAnswersJoined) {
  UnitOfLapsingPlaces full(UnitOfLapsingPlaces::Fails::kNever);
  UnitOfLapsingPlaces failing(UnitOfLapsingPlaces::Fails::kFirstPut);
  EXPECT_TRUE(put_to_both_fails(full, failing, "the unit failed the first put"));
  EXPECT_EQ(full.left(), std::vector<uint8_t>{1}) << "the ticket of its one answer";
  EXPECT_TRUE(failing.left().empty());
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
