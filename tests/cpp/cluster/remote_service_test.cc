// The controller and storage services against bad peers and failures: raw
// malformed requests get error replies that name the problem and the service
// keeps serving; a stopped storage unit fails puts with kTimeout and leaves
// nothing ready; a restarted unit takes puts again, and the samples it lost
// are not served until they are put again; a controller restarted from a
// checkpoint never serves a consumed sample again. Garbage from one peer
// while another works: remote_service_concurrency_test.cc.
#include <gtest/gtest.h>

#include <numeric>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "controller_test_support.h"
#include "eventually.h"
#include "transport/connection.h"
#include "transport/control_protocol.h"
#include "transport/wire_codec.h"
#include "service_test_support.h"
#include "remote_cluster.h"
#include "remote_service_test_support.h"
#include "storage_test_support.h"
#include "wire_test_support.h"
#include "transport/storage_routing.h"

namespace seqflow::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using transport::Frames;
namespace wire = transport::wire;

std::string msgpack_text(const Tree& value) { return value.bytes(); }

Tree indexes_of(const std::vector<int64_t>& indexes) { return Tree::numbers(std::span<const int64_t>(indexes)); }

// A valid put request for storage: int64 values under field "x".
Frames put_request(const std::vector<int64_t>& indexes, const std::vector<int64_t>& values) {
  Frames frames(1);
  const std::string columns = wire::append_columns({int64_column("x", values)}, {}, frames);
  Tree header = test::storage_request(indexes);
  header["columns"] = Tree::read(columns);
  frames[0] = test::tree_frame(header);
  return frames;
}

int64_t stored_samples(transport::Connection& storage) {
  Frames reply = storage.call("stats", test::message_of(Tree::map()));
  return wire::read_header(reply, 0, "stats reply", {"samples", "bytes", "overhead_bytes"}).integer("samples");
}

std::vector<std::string> partitions(transport::Connection& controller) {
  Frames reply = controller.call("partition_list", test::message_of(Tree::map()));
  return wire::read_header(reply, 0, "partition_list reply", {"partitions"}).texts("partitions");
}

struct BadRequest {
  const char* name;
  std::string op;
  std::function<Frames()> args;
  ErrorCode code;
  std::vector<std::string> fragments;  // the reply names the problem
};

// Each request fails as described; a valid call right after it succeeds.
void expect_each_answered(transport::Connection& connection, const std::vector<BadRequest>& requests,
                          const std::function<void()>& valid_call) {
  for (const BadRequest& request : requests) {
    EXPECT_TRUE(throws_error(
        request.code, [&] { connection.call(request.op, request.args()); }, request.fragments))
        << request.name;
    EXPECT_NO_THROW(valid_call()) << "after " << request.name;
  }
}

TEST(RemoteServiceMalformed, ControllerAnswersBadRequestsAndKeepsServing) {
  RemoteCluster cluster(1);
  zmq::context_t context;
  transport::Connection controller(context, cluster.controller_endpoint(),
                                   transport::ConnectionOptions{.timeout = 5s, .security = {}});
  const std::string too_deep = nested_msgpack(kMaxDecodeNesting + 1);
  const std::vector<BadRequest> requests = {
      {"no header frame",
       "partition_list",
       [] { return Frames(); },
       ErrorCode::kInvalidArgument,
       {"partition_list request needs a header frame at position 0, got 0 frames"}},
      {"header not MessagePack",
       "insert",
       [] { return server::test::frames_of({"\xc1\xc1"}); },
       ErrorCode::kInvalidArgument,
       {"insert request header is not valid MessagePack"}},
      {"truncated header",
       "insert",
       [] {
         const std::string valid = msgpack_text(Tree{{"partition_id", "p"}, {"count", 3}});
         return server::test::frames_of({std::string_view(valid).substr(0, valid.size() - 2)});
       },
       ErrorCode::kInvalidArgument,
       {"insert request header is not valid MessagePack"}},
      {"header not a map",
       "insert",
       [] {
         return server::test::frames_of({msgpack_text(Tree::array({"p", 3}))});
       },
       ErrorCode::kInvalidArgument,
       {"insert request header must be a MessagePack map, got array"}},
      {"header nested too deep",
       "get_meta",
       [&] { return server::test::frames_of({too_deep}); },
       ErrorCode::kInvalidArgument,
       {"get_meta request header nests deeper than " + std::to_string(kMaxDecodeNesting) + " levels"}},
      {"unknown field",
       "insert",
       [] {
         return test::message_of(Tree{{"partition_id", "p"}, {"count", 3}, {"priority", 1}});
       },
       ErrorCode::kInvalidArgument,
       {"insert request has an unknown field 'priority'"}},
      {"missing field",
       "insert",
       [] {
         return test::message_of(Tree{{"partition_id", "p"}});
       },
       ErrorCode::kInvalidArgument,
       {"insert request lacks the field 'count'"}},
      {"wrong type",
       "insert",
       [] {
         return test::message_of(Tree{{"partition_id", "p"}, {"count", "3"}});
       },
       ErrorCode::kInvalidArgument,
       {"insert request field 'count' must be an integer, got string"}},
      {"partial index array",
       "mark_produced",
       [] {
         return test::message_of(Tree{{"partition_id", "p"},
                                      {"indexes", Tree::binary(std::vector<uint8_t>(12))},
                                      {"fields", Tree::map()},
                                      {"custom_meta", Tree::array()}});
       },
       ErrorCode::kInvalidArgument,
       {"mark_produced request field 'indexes' holds a partial element"}},
      {"storage op",
       "put",
       [] { return put_request({0}, {1}); },
       ErrorCode::kNotFound,
       {"unknown operation 'put'", "get_meta", "insert"}},
  };
  expect_each_answered(controller, requests, [&] { partitions(controller); });
  EXPECT_TRUE(partitions(controller).empty()) << "no bad request created a partition";
  auto client = cluster.client();
  EXPECT_EQ(client->put_new("p", {int64_column("x", {4})}, {}).size(), 1u);
}

TEST(RemoteServiceMalformed, StorageAnswersBadPutsAndKeepsServing) {
  RemoteCluster cluster(1);
  zmq::context_t context;
  transport::Connection storage(context, cluster.unit(0).endpoint(),
                                transport::ConnectionOptions{.timeout = 5s, .security = {}});
  const auto spoiled_put = [](const std::function<void(Tree & header, Frames & frames)>& spoil) {
    return [spoil] {
      Frames frames = put_request({0, 1}, {10, 11});
      Tree header = test::tree_of(frames[0]);
      spoil(header, frames);
      frames[0] = test::tree_frame(header);
      return frames;
    };
  };
  const std::vector<BadRequest> requests = {
      {"missing data frame",
       "put",
       spoiled_put([](Tree&, Frames& frames) { frames.pop_back(); }),
       ErrorCode::kInvalidArgument,
       {"put request names 1 columns but carries 0 data frames"}},
      {"extra data frame",
       "put",
       spoiled_put([](Tree&, Frames& frames) { frames.push_back(transport::copy_frame(std::string_view("?"))); }),
       ErrorCode::kInvalidArgument,
       {"put request names 1 columns but carries 2 data frames"}},
      {"offset past the frame",
       "put",
       spoiled_put([](Tree& header, Frames&) {
         header["columns"][0]["offsets"] = Tree::numbers(std::span<const uint64_t>(std::vector<uint64_t>{0, 8, 24}));
       }),
       ErrorCode::kInvalidArgument,
       {"column \"x\", sample 1", "beyond the buffer of 16 bytes"}},
      {"offsets for the wrong sample count",
       "put",
       spoiled_put([](Tree& header, Frames&) {
         header["columns"][0]["offsets"] = Tree::numbers(std::span<const uint64_t>(std::vector<uint64_t>{0, 16}));
       }),
       ErrorCode::kInvalidArgument,
       {"put request column 0 field 'offsets' must hold 3 offsets"}},
      {"unknown column field",
       "put",
       spoiled_put([](Tree& header, Frames&) { header["columns"][0]["order"] = "C"; }),
       ErrorCode::kInvalidArgument,
       {"put request column 0 has an unknown field 'order'"}},
      {"unknown header field",
       "put",
       spoiled_put([](Tree& header, Frames&) { header["partition_id"] = "p"; }),
       ErrorCode::kInvalidArgument,
       {"put request has an unknown field 'partition_id'"}},
      {"negative index",
       "put",
       spoiled_put([](Tree& header, Frames&) {
         header["indexes"] = indexes_of({0, -1});
       }),
       ErrorCode::kInvalidArgument,
       {"global_indexes[1] is negative: -1"}},
      {"columns not an array",
       "put",
       spoiled_put([](Tree& header, Frames&) { header["columns"] = 1; }),
       ErrorCode::kInvalidArgument,
       {"put request columns must be an array"}},
      {"segments that do not add up",
       "put",
       spoiled_put([](Tree& header, Frames&) {
         header["segment_samples"] = Tree::numbers(std::span<const uint64_t>(std::vector<uint64_t>{1, 2}));
       }),
       ErrorCode::kInvalidArgument,
       {"segment_samples must be positive counts that add up to its 2 samples"}},
      {"an empty segment",
       "put",
       spoiled_put([](Tree& header, Frames&) {
         header["segment_samples"] = Tree::numbers(std::span<const uint64_t>(std::vector<uint64_t>{2, 0}));
       }),
       ErrorCode::kInvalidArgument,
       {"segment_samples must be positive counts"}},
      {"more segments than columns",
       "put",
       spoiled_put([](Tree& header, Frames&) {
         header["segment_samples"] = Tree::numbers(std::span<const uint64_t>(std::vector<uint64_t>{1, 1}));
       }),
       ErrorCode::kInvalidArgument,
       {"names 1 columns for 2 segments"}},
      {"segments with local frames",
       "put",
       spoiled_put([](Tree& header, Frames&) {
         header["segment_samples"] = Tree::numbers(std::span<const uint64_t>(std::vector<uint64_t>{2}));
         header["local_frames"] = Tree::map();
       }),
       ErrorCode::kInvalidArgument,
       {"segment_samples", "must be absent with local_frames"}},
      {"get of a missing sample",
       "get",
       [] {
         Tree header = test::storage_request({5});
         header["fields"] = Tree::array({"x"});
         return test::message_of(header);
       },
       ErrorCode::kStaleSample,
       {"global index 5", "no data"}},
      {"controller op",
       "get_meta",
       [] { return test::message_of(Tree::map()); },
       ErrorCode::kNotFound,
       {"unknown operation 'get_meta'", "put"}},
  };
  expect_each_answered(storage, requests, [&] { stored_samples(storage); });
  EXPECT_EQ(stored_samples(storage), 0) << "no bad put stored anything";

  storage.call("put", put_request({3, 4}, {30, 40}));
  Tree get = test::storage_request({4, 3});
  get["fields"] = Tree::array({"x"});
  Frames reply = storage.call("get", test::message_of(get));
  const EncodedMap header = wire::read_header(reply, 0, "get reply", {"fields", "local_frames", "lease"});
  const auto rows = wire::take_views(header.value("fields"), reply, 1, 2, 1, "get reply");
  EXPECT_EQ(int64_of(rows[0][0]), 40);
  EXPECT_EQ(int64_of(rows[1][0]), 30);
}

TEST(RemoteServiceLimits, OversizedRequestsGetAnErrorAndTheServicesKeepServing) {
  constexpr size_t kLimit = 64 * 1024;
  server::ControllerServiceOptions controller_options;
  controller_options.service.max_request_bytes = kLimit;
  RemoteCluster cluster(1, {}, controller_options);
  server::StorageServiceOptions storage_options;
  storage_options.service.max_request_bytes = kLimit;
  server::StorageService storage(storage_options);
  storage.start();
  zmq::context_t context;
  transport::Connection unit(context, storage.endpoint(), transport::ConnectionOptions{.timeout = 5s, .security = {}});
  transport::Connection controller(context, cluster.controller_endpoint(),
                                   transport::ConnectionOptions{.timeout = 5s, .security = {}});
  const std::string limit = "over max_request_bytes = " + std::to_string(kLimit);

  const std::vector<int64_t> many(kLimit / sizeof(int64_t) + 1, 7);
  std::vector<int64_t> indexes(many.size());
  for (size_t i = 0; i < indexes.size(); ++i) indexes[i] = static_cast<int64_t>(i);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.call("put", put_request(indexes, many)); },
                           {"request 'put'", limit}));
  EXPECT_EQ(stored_samples(unit), 0);
  unit.call("put", put_request({1}, {2}));
  EXPECT_EQ(stored_samples(unit), 1);

  const Tree big{{"partition_id", std::string(kLimit, 'p')}, {"count", 1}};
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { controller.call("insert", test::message_of(big)); },
                           {"request 'insert'", limit}));
  EXPECT_TRUE(partitions(controller).empty());
  controller.call("insert", test::message_of(Tree{{"partition_id", "p"}, {"count", 1}}));
  EXPECT_EQ(partitions(controller), std::vector<std::string>{"p"});
}

// Samples of the partition with field "x" produced; 0 when it does not exist.
size_t ready_samples(Client& client, const std::string& partition) {
  const std::string fields[] = {"x"};
  const auto status = client.control().production_status(fields, partition);
  if (!status) return 0;
  return static_cast<size_t>(std::count(status->produced.begin(), status->produced.end(), 1));
}

// Fetches one sample at a time until none is ready for `task` (polling
// returns nothing when fewer than the batch are ready); each sample's data
// must be its custom_meta id. Returns the ids.
std::vector<int64_t> drain(Client& client, const std::string& partition, const std::string& task) {
  std::vector<int64_t> out;
  while (true) {
    const BatchMeta meta = client.get_meta(fetch(1, partition, task));
    if (meta.size() == 0) return out;
    EXPECT_EQ(values_of(client, meta), ids_of(meta)) << "data and custom_meta of the same sample";
    out.push_back(ids_of(meta).at(0));
  }
}

TEST(RemoteServiceFailures, PutToAStoppedUnitTimesOutLeavesNothingReadyAndWorksAfterTheUnitRestarts) {
  // A unit that died less than storage_silence_limit ago still gets the
  // controller's drop of the failed put's released samples, and every insert
  // waits for that drop (up to storage_timeout, 30 s by default): keep it short.
  server::ControllerServiceOptions controller_options;
  controller_options.storage_timeout = 300ms;
  RemoteCluster cluster(2, {}, controller_options);
  // Above ZeroMQ's longest reconnect interval (1 s), so that the re-put
  // after the restart finds the unit reconnected within the timeout.
  constexpr auto kTimeout = 2000ms;
  auto client = cluster.client(kTimeout);
  client->put_new("other", {int64_column("x", {1, 2, 3, 4})}, ids(1, 4));
  // Samples on both units (placed in blocks of kPlacementBlock global indexes).
  std::vector<int64_t> values(2 * transport::kPlacementBlock);
  std::iota(values.begin(), values.end(), 10);

  cluster.stop_unit(1);
  EXPECT_TRUE(throws_error(ErrorCode::kTimeout,
                           [&] { client->put_new("p", {int64_column("x", values)}, ids(10, values.size())); },
                           {"'put'", cluster.unit(1).endpoint()}));
  // The rollback ended within the put: its clear came back once the
  // controller gave up the dead unit's drop (after storage_timeout).
  EXPECT_EQ(cluster.drop_failures(), 1.0) << "the put came back before its rollback's clear";
  EXPECT_EQ(ready_samples(*client, "p"), 0u);
  const auto listed = client->control().partition_list();
  EXPECT_EQ(std::count(listed.begin(), listed.end(), "p"), 0) << "the failed put's new partition is gone";

  // The controller keeps serving other partitions: each call within the
  // client's timeout (a timeout throws).
  const BatchMeta other = client->get_meta(fetch(4, "other", "train"));
  ASSERT_EQ(other.size(), 4u);
  EXPECT_EQ(ready_samples(*client, "other"), 4u);
  EXPECT_EQ(client->control().insert("third", 2).size(), 2u);

  cluster.restart_unit(1);
  const BatchMeta put = client->put_new("p", {int64_column("x", values)}, ids(10, values.size()));
  ASSERT_EQ(put.size(), values.size());
  const BatchMeta meta = client->get_meta(fetch(values.size(), "p", "train"));
  ASSERT_EQ(meta.size(), values.size());
  EXPECT_EQ(values_of(*client, meta), ids_of(meta)) << "each sample carries its own value";
}

double restarts_seen(RemoteCluster& cluster) {
  return cluster.controller().metrics().counter("seqflow_storage_restarts_total", "").value();
}

// The global indexes of the samples of `meta` on unit `unit` of `units`.
std::vector<int64_t> on_unit(const BatchMeta& meta, int64_t unit, int64_t units) {
  std::vector<int64_t> out;
  for (int64_t index : meta.global_indexes) {
    if (transport::unit_of(index, static_cast<size_t>(units)) == static_cast<size_t>(unit)) out.push_back(index);
  }
  return out;
}

std::vector<int64_t> produced(Client& client, const std::string& partition) {
  const std::string fields[] = {"x"};
  std::vector<int64_t> out;
  for (const auto& [index, done] : test::produced_all(client.control(), fields, partition)) {
    if (done) out.push_back(index);
  }
  return out;
}

std::vector<int64_t> sorted_indexes(const BatchMeta& meta) {
  std::vector<int64_t> out = meta.global_indexes;
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RemoteServiceFailures, SamplesOfAUnitRestartedEmptyAreNotServedUntilTheyArePutAgain) {
  constexpr int64_t kBlock = transport::kPlacementBlock;
  const auto counting = [](int64_t first, int64_t count) {
    std::vector<int64_t> values(static_cast<size_t>(count));
    std::iota(values.begin(), values.end(), first);
    return values;
  };
  RemoteCluster cluster(2);
  auto client = cluster.client();
  // Global indexes: "other" block 0 (unit 0), "p" blocks 1 (unit 1) and 2 (unit 0).
  const BatchMeta other = client->put_new("other", {int64_column("x", counting(100, kBlock))}, ids(100, kBlock));
  const BatchMeta put = client->put_new("p", {int64_column("x", counting(10, 2 * kBlock))}, ids(10, 2 * kBlock));
  ASSERT_EQ(put.global_indexes, counting(kBlock, 2 * kBlock));
  const BatchMeta early = client->get_meta(fetch(2, "p", "train"));
  ASSERT_EQ(early.global_indexes, counting(kBlock, 2));

  // The unit of block 1 (second in endpoint order) comes back empty on its
  // endpoint: a new instance.
  const size_t victim = cluster.unit(0).endpoint() < cluster.unit(1).endpoint() ? 1 : 0;
  const uint64_t old_instance = cluster.unit(victim).instance_id();
  cluster.stop_unit(victim);
  cluster.restart_unit(victim);
  EXPECT_NE(cluster.unit(victim).instance_id(), old_instance);
  ASSERT_TRUE(eventually([&] { return restarts_seen(cluster) == 1; }, 10s)) << "the restart was not seen";

  // Its samples, in every partition, are not produced; unit 0's are.
  const auto lost = on_unit(put, 1, 2);
  EXPECT_EQ(lost, counting(kBlock, kBlock));
  EXPECT_EQ(produced(*client, "p"), on_unit(put, 0, 2));
  EXPECT_EQ(produced(*client, "other"), on_unit(other, 0, 2));
  // Not served: block 2 holds the only ready samples train did not consume.
  EXPECT_EQ(client->get_meta(fetch(kBlock + 1, "p", "train")).size(), 0u);
  const BatchMeta before = client->get_meta(fetch(kBlock, "p", "train"));
  EXPECT_EQ(sorted_indexes(before), counting(2 * kBlock, kBlock));
  EXPECT_EQ(values_of(*client, before), ids_of(before)) << "unit 0 kept its data";
  EXPECT_EQ(client->get_meta(fetch(1, "p", "train")).size(), 0u);
  MetaRequest everything = fetch(0, "p", "");
  everything.mode = MetaMode::kForceFetch;
  const BatchMeta forced = client->get_meta(everything);  // every sample, lost ones not produced
  EXPECT_EQ(sorted_indexes(forced), put.global_indexes);
  std::vector<int64_t> forced_produced;
  for (size_t i = 0; i < forced.size(); ++i) {
    if (forced.produced(i, 0)) forced_produced.push_back(forced.global_indexes[i]);
  }
  std::sort(forced_produced.begin(), forced_produced.end());
  EXPECT_EQ(forced_produced, on_unit(put, 0, 2));

  // The producer puts the lost samples again (new values): served with the
  // new data, except the two train consumed before the restart.
  BatchMeta again;
  again.global_indexes = lost;
  again.partition_ids = PartitionIdList(lost.size(), "p");
  std::vector<int64_t> new_values;
  for (int64_t index : lost) new_values.push_back(1000 + index);
  client->put_existing(again, {int64_column("x", new_values)}, {});
  EXPECT_EQ(produced(*client, "p"), put.global_indexes);
  const BatchMeta after = client->get_meta(fetch(kBlock - 2, "p", "train"));
  EXPECT_EQ(sorted_indexes(after), counting(kBlock + 2, kBlock - 2));
  std::vector<int64_t> expected;
  for (int64_t index : after.global_indexes) expected.push_back(1000 + index);
  EXPECT_EQ(values_of(*client, after), expected);
  EXPECT_EQ(client->get_meta(fetch(1, "p", "train")).size(), 0u) << "the consumed two are not served twice";
  EXPECT_TRUE(client->control().all_consumed("train", "p"));

  // Heartbeats of the same instance forget nothing.
  std::this_thread::sleep_for(4 * RemoteCluster::kHeartbeat);
  EXPECT_EQ(restarts_seen(cluster), 1);
  EXPECT_EQ(produced(*client, "p"), put.global_indexes);
  EXPECT_EQ(produced(*client, "other"), on_unit(other, 0, 2)) << "not put again";
}

// Registrations as a unit sends them: a new instance id on a known endpoint
// is a restart, applied once the routing exists (every unit registered).
TEST(RemoteServiceFailures, ARestartBeforeEveryUnitRegisteredIsAppliedOnceTheRoutingExists) {
  LoneController lone;
  server::ControllerService& service = lone.service;
  transport::Connection& controller = lone.connection;
  const auto register_unit = [&](const std::string& endpoint, const Tree& instance) {
    controller.call("register_storage", test::message_of(Tree{{"endpoint", endpoint},
                                                              {"instance", instance},
                                                              {"admin_token", "t"},
                                                              {"protocol", transport::control::kProtocolVersion}}));
  };
  Controller& core = service.controller();
  constexpr int64_t kBlock = transport::kPlacementBlock;
  const std::vector<int64_t> indexes = core.insert("p", 2 * kBlock).global_indexes;  // a block on each unit
  core.mark_produced("p", indexes, {}, {{"x", FieldSchema{DType::kInt64, {1}}}}, {});
  const std::string x[] = {"x"};
  const auto status = [&] { return test::produced_all(core, x, "p"); };
  using Status = std::vector<std::pair<int64_t, bool>>;
  // Each sample produced or not as its unit's (block 0: unit 0, block 1: unit 1).
  const auto per_unit = [&](bool unit_0, bool unit_1) {
    Status out;
    for (const int64_t gi : indexes) out.emplace_back(gi, gi < kBlock ? unit_0 : unit_1);
    return out;
  };

  register_unit("tcp://127.0.0.1:2", 7);
  register_unit("tcp://127.0.0.1:2", 7);
  register_unit("tcp://127.0.0.1:2", -8);  // restarted: unit 0 or 1 is not known yet
  EXPECT_EQ(status(), per_unit(true, true));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { register_unit("tcp://127.0.0.1:1", "new"); },
                           {"register_storage request field 'instance'", "integer"}));
  // Without an instance id (a unit before instance ids): never a restart.
  controller.call("register_storage", test::message_of(Tree{{"endpoint", "tcp://127.0.0.1:1"},
                                                            {"admin_token", "t"},
                                                            {"protocol", transport::control::kProtocolVersion}}));
  // Both registered: tcp://127.0.0.1:2 is unit 1 of 2.
  EXPECT_EQ(status(), per_unit(true, false));
  EXPECT_EQ(service.metrics().counter("seqflow_storage_restarts_total", "").value(), 1);
  core.mark_produced("p", indexes, {}, {{"x", FieldSchema{DType::kInt64, {1}}}}, {});
  register_unit("tcp://127.0.0.1:2", -8);
  register_unit("tcp://127.0.0.1:1", 3);
  EXPECT_EQ(status(), per_unit(true, true)) << "a first id is no restart";
  register_unit("tcp://127.0.0.1:1", 4);
  EXPECT_EQ(status(), per_unit(false, true));
  EXPECT_EQ(service.metrics().counter("seqflow_storage_restarts_total", "").value(), 2);
}

TEST(RemoteServiceFailures, ControllerRestartedFromACheckpointServesTheRestAndNeverAConsumedSample) {
  TempDir dir;
  const std::string checkpoint = dir.file("ckpt");
  RemoteCluster cluster(2);
  auto client = cluster.client();
  std::vector<int64_t> values(10);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(100 + i);
  client->put_new("p", {int64_column("x", values)}, ids(100, values.size()));
  std::set<int64_t> consumed;
  for (int64_t id : ids_of(client->get_meta(fetch(4, "p", "train")))) consumed.insert(id);
  ASSERT_EQ(consumed.size(), 4u);
  ASSERT_EQ(client->get_meta(fetch(1, "p", "eval")).size(), 1u);
  client->save_checkpoint(checkpoint, Value::object());
  // Consumed after the checkpoint: forgotten by the restart, served again.
  ASSERT_EQ(client->get_meta(fetch(2, "p", "train")).size(), 2u);

  cluster.restart_controller(checkpoint);
  auto fresh = cluster.client();
  const std::vector<int64_t> rest = drain(*fresh, "p", "train");
  EXPECT_EQ(rest.size(), values.size() - consumed.size());
  for (int64_t id : rest) EXPECT_EQ(consumed.count(id), 0u) << "sample " << id << " served twice for train";
  std::set<int64_t> all(consumed);
  all.insert(rest.begin(), rest.end());
  EXPECT_EQ(all.size(), values.size());
  // The old client reconnects to the restarted controller on its own.
  EXPECT_EQ(drain(*client, "p", "eval").size(), values.size() - 1);
}

// A unit drops, saves and loads only for its controller: a client (or any
// peer) that sends those ops itself is refused, with or without a guessed
// token, and nothing changes; through the controller they work.
TEST(RemoteServiceSecurity, AUnitClearsSavesAndLoadsOnlyForItsController) {
  RemoteCluster cluster(1);
  auto client = cluster.client();
  const BatchMeta put = client->put_new("p", {int64_column("x", {1, 2})}, {});
  TempDir dir;
  zmq::context_t context;
  transport::Connection unit(context, cluster.unit(0).endpoint(),
                             transport::ConnectionOptions{.timeout = 5s, .security = {}});
  const std::string victim = dir.file("victim.txt");
  { std::ofstream(victim) << "keep me"; }
  const Tree indexes = Tree::numbers(std::span<const int64_t>(put.global_indexes));
  for (const Tree& token : {Tree(), Tree("0123456789abcdef0123456789abcdef"), Tree("")}) {
    for (const auto& [op, request] : std::vector<std::pair<std::string, Tree>>{{"clear", Tree{{"indexes", indexes}}},
                                                                               {"save", Tree{{"path", victim}}},
                                                                               {"load", Tree{{"path", victim}}}}) {
      Tree sent = request;
      if (!token.is_null()) sent["admin_token"] = token;
      EXPECT_TRUE(throws_error(ErrorCode::kPermissionDenied, [&] { unit.call(op, test::message_of(sent)); },
                               {op + " request refused", "only the controller"}))
          << op << " " << (token.is_null() ? "no token" : "a token");
    }
  }
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { unit.call("clear_all", test::message_of(Tree::map())); },
                           {"unknown operation 'clear_all'"}));
  EXPECT_EQ(cluster.unit(0).storage().stats().samples, 2u);
  std::ifstream kept(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "keep me");
  // Through the controller: a checkpoint saves and loads the unit.
  client->save_checkpoint(dir.file("checkpoint"), Value::object());
  client->load_checkpoint(dir.file("checkpoint"));
  EXPECT_EQ(cluster.unit(0).storage().stats().samples, 2u);
  client->clear_samples("p", put.global_indexes, {});
  EXPECT_EQ(cluster.unit(0).storage().stats().samples, 0u);
}

// A clear naming an index no sample can have (negative, or past the
// largest an index can be) is refused whole: nothing is cleared.
TEST(RemoteServiceBadInput, AClearWithAnImpossibleIndexClearsNothing) {
  RemoteCluster cluster(1);
  auto client = cluster.client();
  const BatchMeta put = client->put_new("p", {int64_column("x", {1, 2})}, ids(1, 2));
  zmq::context_t context;
  transport::Connection controller(context, cluster.controller_endpoint(),
                                   transport::ConnectionOptions{.timeout = 5s, .security = {}});
  for (const int64_t impossible : {int64_t{-5}, int64_t{1} << 62}) {
    const std::vector<int64_t> indexes{put.global_indexes[0], impossible};
    EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                             [&] {
                               controller.call(
                                   "clear_samples",
                                   test::message_of(Tree{{"partition_id", "p"}, {"indexes", Tree::numbers(indexes)}}));
                             },
                             {"clear_samples", std::to_string(impossible)}))
        << impossible;
  }
  const std::string fields[] = {"x"};
  EXPECT_EQ(client->control().production_status(fields, "p")->global_indexes, put.global_indexes);
}

// Without CURVE a peer can reach register_storage; it still cannot swap a
// known unit's admin token (which would lock the controller out of the
// unit's clears and saves) unless the unit restarted (a new instance id).
TEST(RemoteServiceSecurity, AKnownUnitsAdminTokenChangesOnlyWithARestart) {
  LoneController lone;
  transport::Connection& controller = lone.connection;
  const auto register_unit = [&](int64_t instance, const std::string& token) {
    controller.call("register_storage", test::message_of(Tree{{"endpoint", "tcp://127.0.0.1:2"},
                                                              {"instance", instance},
                                                              {"admin_token", token},
                                                              {"protocol", transport::control::kProtocolVersion}}));
  };
  register_unit(7, "a");
  register_unit(7, "a");
  EXPECT_TRUE(throws_error(ErrorCode::kPermissionDenied, [&] { register_unit(7, "b"); },
                           {"register_storage", "another admin token"}));
  register_unit(8, "b");  // a restart: a new instance brings its own token
}

// A checkpoint needs every unit: a silent one fails it at once instead of
// holding inserts and clears for the storage timeout.
TEST(RemoteServiceFailures, ACheckpointWithASilentUnitFailsAtOnce) {
  server::ControllerServiceOptions options;
  options.storage_silence_limit = 300ms;
  options.storage_timeout = 30s;
  RemoteCluster cluster(2, {}, options);
  auto client = cluster.client(5s);
  client->put_new("p", {int64_column("x", {1, 2})}, ids(1, 2));
  cluster.stop_unit(1);
  std::this_thread::sleep_for(600ms);
  TempDir dir;
  // The controller's own refusal, naming the silent unit: a checkpoint that
  // waited for the unit (up to storage_timeout) would meet the client's 5 s
  // timeout instead, whose error names no unit.
  EXPECT_TRUE(throws_error(ErrorCode::kTimeout, [&] { client->save_checkpoint(dir.file("c"), Value::object()); },
                           {"storage unit", "has not registered"}));
}

// A put costs the same however many partitions live: no client call lists
// them (insert and kv_resolve say whether they made the partition), and a
// failed put's undo removes only a partition it made, in one step.
TEST(RemoteServicePartitions, PutsNeverListThePartitionsAndTellWhetherTheyMadeOne) {
  RemoteCluster cluster(2);
  auto client = cluster.client();
  for (int p = 0; p < 50; ++p) client->put_new("p" + std::to_string(p), {int64_column("x", {p})}, ids(p, 1));
  const std::string keys[] = {"a", "b"};
  client->kv_put("kv", keys, {}, {int64_column("x", {1, 2})});
  client->kv_put("kv", keys, {}, {int64_column("x", {3, 4})});
  EXPECT_EQ(cluster.controller().metrics().counter("seqflow_requests_total", "", {{"op", "partition_list"}}).value(),
            0.0);
  bool created = true;
  client->control().insert("p0", 1, &created);
  EXPECT_FALSE(created);
  client->control().insert("fresh", 1, &created);
  EXPECT_TRUE(created);
  client->control().kv_resolve("kv2", keys, {}, &created);
  EXPECT_TRUE(created);
  client->control().kv_resolve("kv2", keys, {}, &created);
  EXPECT_FALSE(created);
  // Only an empty partition is forgotten.
  EXPECT_FALSE(client->control().forget_partition_if_empty("p0"));
  client->control().insert("empty", 1, &created);
  const std::string fields[] = {"x"};
  const auto samples = client->control().production_status(fields, "empty");
  client->clear_samples("empty", samples->global_indexes, {});
  EXPECT_TRUE(client->control().forget_partition_if_empty("empty"));
  EXPECT_FALSE(client->control().production_status(fields, "empty").has_value());
  // A partition a task has fetched from is in use, even empty.
  client->put_new("used", {int64_column("x", {1})}, ids(1, 1));
  const BatchMeta fetched = client->get_meta(fetch(1, "used", "train"));
  client->clear_samples("used", fetched.global_indexes, fetched.generations);
  EXPECT_FALSE(client->control().forget_partition_if_empty("used"));
  client->control().reset_consumption("used", nullptr);
  EXPECT_TRUE(client->control().forget_partition_if_empty("used"));
  EXPECT_FALSE(client->control().forget_partition_if_empty("never"));
}

// kv_resolve says which keys it made, embedded and remote alike, so that a
// kv_put whose write fails removes only those: a key another writer made
// between its look and its resolve stays, with its data.
TEST(RemoteServicePartitions, KvResolveTellsWhichKeysItMade) {
  RemoteCluster cluster(1);
  auto remote = cluster.client();
  Controller embedded;
  for (ControlPlane* control : {static_cast<ControlPlane*>(&embedded), &remote->control()}) {
    const std::string first[] = {"a", "b"};
    std::vector<uint8_t> made;
    control->kv_resolve("kv", first, {}, nullptr, &made);
    EXPECT_EQ(made, (std::vector<uint8_t>{1, 1}));
    const std::string second[] = {"c", "a"};
    control->kv_resolve("kv", second, {}, nullptr, &made);
    EXPECT_EQ(made, (std::vector<uint8_t>{1, 0}));
  }
  // A put whose write fails (a column that does not fit its schema) after
  // its resolve: the key it made goes, the one that was there stays.
  const std::string keys[] = {"b", "fresh"};
  remote->kv_put("kv", std::span<const std::string>(keys).first(1), {}, {int64_column("x", {2})});
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             remote->kv_put("kv", keys, {}, {object_column("x", {"not", "int64"})});
                           },
                           {"x"}));
  const std::string both[] = {"b", "fresh"};
  EXPECT_EQ(remote->control().kv_find("kv", both).size(), 1u) << "the failed put removed a key it did not make";
}

// A checkpoint path a peer names never replaces a file that is not a
// checkpoint of that kind (its contents and mode stay).
TEST(RemoteServiceSecurity, ASaveNeverReplacesAFileThatIsNotACheckpoint) {
  RemoteCluster cluster(1);
  cluster.client();  // waits until the unit has registered
  TempDir dir;
  zmq::context_t context;
  transport::Connection controller(context, cluster.controller_endpoint(),
                                   transport::ConnectionOptions{.timeout = 5s, .security = {}});
  const std::string victim = dir.file("authorized_keys");
  { std::ofstream(victim) << "ssh-ed25519 AAAA"; }
  std::filesystem::permissions(victim, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  for (const char* op : {"save", "save_storage"}) {
    const std::string path = std::string(op) == "save" ? victim : victim.substr(0, victim.size() - 6);
    if (std::string(op) == "save_storage") {
      std::ofstream(path + ".unit0") << "not a checkpoint";
    }
    EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                             [&] {
                               controller.call(op, test::message_of(Tree{{"path", path}}));
                             },
                             {"refusing to write", "never replaces"}))
        << op;
  }
  std::ifstream kept(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "ssh-ed25519 AAAA");
  EXPECT_EQ(std::filesystem::status(victim).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

}  // namespace
}  // namespace seqflow::test
