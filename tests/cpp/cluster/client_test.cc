// The client, embedded and remote (real controller and storage services on
// loopback, one or three storage units): puts are atomic and leave nothing
// behind on failure, reads are views, clears reach the storage, and
// checkpoints are atomic directories. Concurrent puts, fetches and clears:
// client_concurrency_test.cc.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <thread>

#include "client_test_support.h"
#include "controller_test_support.h"
#include "common/json_text.h"
#include "core/custom_meta.h"
#include "remote_cluster.h"
#include "service_test_support.h"
#include "seqflow/client.h"
#include "storage_test_support.h"
#include "transport/storage_routing.h"

namespace seqflow::test {
namespace {

Column float_column(const std::string& field, const std::vector<float>& values) {
  std::vector<Bytes> samples;
  for (float v : values) samples.push_back(bytes_of(std::vector<float>{v}));
  return column_of(field, DType::kFloat32, {{1}}, samples);
}

INSTANTIATE_TEST_SUITE_P(Modes, ClientModes, ::testing::ValuesIn(kClientModes), mode_name);

// What only remote mode has: storage units that can die, timeouts.
class RemoteModes : public ClientModes {};

INSTANTIATE_TEST_SUITE_P(Modes, RemoteModes, ::testing::Values(Mode{"RemoteOneUnit", 1}, Mode{"RemoteThreeUnits", 3}),
                         mode_name);

size_t partition_size(Client& client, const std::string& partition) {
  return test::sample_count(client.control(), partition);
}

bool has_partition(Client& client, const std::string& partition) {
  const auto list = client.control().partition_list();
  return std::find(list.begin(), list.end(), partition) != list.end();
}

TEST(SchemaOf, FixedNestedAndObjects) {
  const FieldSchema fixed = schema_of(int64_column("x", {1, 2}));
  EXPECT_EQ(fixed.dtype, DType::kInt64);
  EXPECT_EQ(fixed.shape, (Shape{1}));
  EXPECT_FALSE(fixed.is_nested);

  const FieldSchema nested = schema_of(good_column());  // shapes {2} and {1}
  EXPECT_TRUE(nested.is_nested);
  EXPECT_EQ(nested.shape, (Shape{-1}));

  const Column ranks = column_of("r", DType::kUInt8, {{2}, {1, 1}}, {Bytes(2), Bytes(1)});
  EXPECT_TRUE(schema_of(ranks).is_nested);
  EXPECT_TRUE(schema_of(ranks).shape.empty());

  const FieldSchema object = schema_of(object_column("s", {"ab", "c"}));
  EXPECT_TRUE(object.is_object);
  EXPECT_FALSE(object.is_nested);

  Column bad = good_column();
  bad.offsets = {0, 8, 4};
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { schema_of(bad); }, {"\"x\"", "decrease"}));
}

TEST_P(ClientModes, PutThenFetchSeesDataProductionAndCustomMetaTogether) {
  auto client = make_client();
  const BatchMeta put = client->put_new("p", {int64_column("x", {10, 11, 12})}, lengths_meta({5, 6, 7}));
  ASSERT_EQ(put.size(), 3u);
  EXPECT_EQ(put.field_schema.at("x").dtype, DType::kInt64);
  EXPECT_EQ(put.production_status, (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(put.custom_meta[2]["total_lengths"], 7);

  const BatchMeta meta = client->get_meta(fetch_request("p", "train", {"x"}, 3));
  ASSERT_EQ(meta.size(), 3u);
  EXPECT_EQ(meta.custom_meta[1]["total_lengths"], 6);
  const std::string fields[] = {"x"};
  const auto rows = client->get_data(meta, fields);
  ASSERT_EQ(rows.size(), 3u);
  std::set<int64_t> seen;
  for (const auto& row : rows) seen.insert(int64_of(row[0]));
  EXPECT_EQ(seen, (std::set<int64_t>{10, 11, 12}));
  // Views of one put share its buffer, back to back (samples of one unit).
  if (units() == 1) {
    EXPECT_EQ(rows[0][0].buffer, rows[1][0].buffer);
  }
}

TEST_P(ClientModes, BadPutsChangeNothing) {
  auto client = make_client();
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { client->put_new("p", {}, {}); }, {"at least one field"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             client->put_new("p", {int64_column("x", {1, 2}), int64_column("y", {1})}, {});
                           },
                           {"\"y\"", "1 samples", "\"x\""}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             client->put_new("p", {int64_column("x", {1, 2})}, lengths_meta({1}));
                           },
                           {"custom_meta holds 1 entries for 2 samples"}));
  std::vector<Value> not_objects = {Value(1), Value::object()};
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             client->put_new("p", {int64_column("x", {1, 2})}, not_objects);
                           },
                           {"custom_meta[0] must be an object"}));
  EXPECT_FALSE(has_partition(*client, "p"));
  EXPECT_EQ(client->storage_stats().samples, 0u);
}

// {"k": {"k": ... {"v": 1}}}: `depth` objects.
Value nested_object(size_t depth) {
  Value value = {{"v", 1}};
  for (size_t d = 1; d < depth; ++d) value = Value{{"k", std::move(value)}};
  return value;
}

// One limit and one message in every mode, checked before anything is
// written: remote requests would otherwise meet the wire's nesting limit.
TEST_P(ClientModes, CustomMetaNestedTooDeepIsRefusedAlikeInEveryMode) {
  auto client = make_client();
  const std::vector<Value> deepest_allowed = {nested_object(kMaxCustomMetaDepth)};
  const BatchMeta put = client->put_new("p", {int64_column("x", {1})}, deepest_allowed);
  EXPECT_EQ(put.custom_meta[0], deepest_allowed[0]);

  const std::vector<Value> too_deep = {Value::object(), nested_object(kMaxCustomMetaDepth + 1)};
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             client->put_new("q", {int64_column("x", {1, 2})}, too_deep);
                           },
                           {"custom_meta[1] (global index", "deeper than 32 levels"}));
  EXPECT_FALSE(has_partition(*client, "q"));
  const int64_t index = put.global_indexes[0];
  EXPECT_TRUE(throws_error(
      ErrorCode::kInvalidArgument,
      [&] { client->control().set_custom_meta("p", std::span(&index, 1), {}, std::span(&too_deep[1], 1)); },
      {"custom_meta[0] (global index " + std::to_string(index) + ")", "deeper than 32 levels"}));
  const std::string keys[] = {"a", "b"};
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { client->control().kv_resolve("kv", keys, too_deep); },
                           {"tags[1] (key 'b')", "deeper than 32 levels"}));
  EXPECT_FALSE(has_partition(*client, "kv"));
  EXPECT_EQ(client->get_meta(fetch_request("p", "t", {"x"}, 1)).custom_meta[0], deepest_allowed[0]);
  EXPECT_EQ(client->storage_stats().samples, 1u);
}

TEST_P(ClientModes, DtypeConflictRollsBackTheInsert) {
  auto client = make_client();
  client->put_new("p", {int64_column("x", {1, 2})}, {});
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { client->put_new("p", {float_column("x", {1.5f})}, {}); },
                           {"dtype conflict"}));
  EXPECT_EQ(partition_size(*client, "p"), 2u);
  EXPECT_EQ(client->storage_stats().samples, 2u);
}

TEST_P(ClientModes, FullStorageLeavesNoSampleAndNoNewPartition) {
  // A block of samples per storage unit (global indexes 0, 1, ...) fills every unit.
  auto client = make_client(StorageOptions{0, transport::kPlacementBlock});
  std::vector<int64_t> values(transport::kPlacementBlock * units());
  client->put_new("a", {int64_column("x", values)}, {});
  EXPECT_TRUE(
      throws_error(ErrorCode::kInvalidArgument, [&] { client->put_new("b", {int64_column("x", {3})}, {}); }, {}));
  EXPECT_FALSE(has_partition(*client, "b"));
  EXPECT_EQ(partition_size(*client, "a"), values.size());
  // The index the failed put had taken is free again.
  client->clear_partition("a");
  const BatchMeta again = client->put_new("b", {int64_column("x", {3})}, {});
  EXPECT_EQ(again.size(), 1u);
}

// A put to a storage unit that is down fails with kTimeout naming the put
// and the unit, within one deadline for the put and its rollback (the put's
// timeout, then a quarter of it), not a full timeout for the put, the
// rollback's clear and the partition check each. The controller holds the
// rollback's clear while it drops the released data on the dead unit, until
// it gives that drop up after storage_timeout: with 3/4 of the put's timeout
// there, the put comes back before that with one deadline (at 1.25x the
// timeout), after it with a timeout per step (the clear alone 2x).
TEST_P(RemoteModes, PutToADeadStorageUnitFailsWithinItsTimeout) {
  constexpr auto kTimeout = std::chrono::milliseconds(2000);
  server::ControllerServiceOptions controller;
  controller.storage_timeout = kTimeout * 3 / 4;
  RemoteCluster cluster(GetParam().storage_units, {}, controller);
  auto patient = cluster.client();  // once it exists every unit has registered
  auto client = cluster.client(kTimeout);
  const std::string dead = cluster.unit(0).endpoint();
  cluster.stop_unit(0);

  std::vector<int64_t> values(transport::kPlacementBlock * units());  // a block on each unit
  EXPECT_TRUE(throws_error(ErrorCode::kTimeout, [&] { client->put_new("p", {int64_column("x", values)}, {}); },
                           {"'put'", dead}));
  EXPECT_EQ(cluster.drop_failures(), 0.0) << "the put came back only after the controller gave up the dead unit";

  // The rollback's clear was sent and runs at the controller even though the
  // client stopped waiting for it: it ends with the dead unit's drop given up.
  EXPECT_TRUE(server::test::holds_within_10s([&] { return cluster.drop_failures() == 1.0; }));
  EXPECT_TRUE(!has_partition(*patient, "p") || partition_size(*patient, "p") == 0);
}

// put_existing asks the control plane about its samples only; the answer
// crosses the wire intact in remote mode.
TEST_P(ClientModes, SampleProductionAnswersForTheAskedSamplesInTheirOrder) {
  auto client = make_client();
  const BatchMeta first = client->put_new("p", {int64_column("prompt", {1})}, {});
  const BatchMeta rest = client->put_new("p", {int64_column("prompt", {2, 3})}, {});
  client->put_existing(first, {int64_column("response", {10})}, {});
  const int64_t asked[] = {rest.global_indexes[1], first.global_indexes[0], 1 << 20};
  const std::string fields[] = {"response", "prompt", "never"};
  const SampleProduction production = client->control().sample_production("p", asked, {}, fields);
  EXPECT_EQ(production.field_count, 3u);
  EXPECT_EQ(production.exists, (std::vector<uint8_t>{1, 1, 0}));
  EXPECT_EQ(production.produced, (std::vector<uint8_t>{0, 1, 0, 1, 1, 0, 0, 0, 0}));
  EXPECT_TRUE(production.has(1, 0));
  const SampleProduction nowhere = client->control().sample_production("nowhere", asked, {}, fields);
  EXPECT_EQ(nowhere.exists, (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_EQ(nowhere.produced, std::vector<uint8_t>(9, 0));
  const SampleProduction none = client->control().sample_production("p", {}, {}, fields);
  EXPECT_TRUE(none.exists.empty());
  EXPECT_TRUE(none.produced.empty());
}

TEST_P(ClientModes, PutExistingAddsFieldsAndRefusesClearedSamples) {
  auto client = make_client();
  const BatchMeta put = client->put_new("p", {int64_column("prompt", {1, 2})}, {});
  const BatchMeta more = client->put_existing(put, {int64_column("response", {10, 20})}, lengths_meta({3, 4}));
  EXPECT_EQ(more.field_schema.size(), 2u);
  EXPECT_EQ(more.production_status, (std::vector<uint8_t>{1, 1, 1, 1}));
  EXPECT_EQ(more.custom_meta[1]["total_lengths"], 4);
  const BatchMeta meta = client->get_meta(fetch_request("p", "train", {"prompt", "response"}, 2));
  EXPECT_EQ(meta.size(), 2u);

  const int64_t first[] = {put.global_indexes[0]};
  client->clear_samples("p", first, {});
  EXPECT_EQ(client->storage_stats().samples, 1u);
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample,
                           [&] {
                             client->put_existing(put, {int64_column("reward", {1, 2})}, {});
                           },
                           {"global index " + std::to_string(put.global_indexes[0]), "no longer exists"}));
  const std::string reward[] = {"reward"};
  const BatchMeta rest{{put.global_indexes[1]}, PartitionIdList(1, "p"), {}, {}, {}, {}, Value::object()};
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { client->get_data(rest, reward); }, {"reward"}));
}

TEST_P(ClientModes, PutExistingConflictKeepsTheOldValues) {
  auto client = make_client();
  const BatchMeta put = client->put_new("p", {int64_column("x", {1, 2})}, {});
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             client->put_existing(put, {float_column("x", {9.f, 9.f})}, {});
                           },
                           {"dtype conflict"}));
  const std::string fields[] = {"x"};
  const auto rows = client->get_data(put, fields);
  EXPECT_EQ(int64_of(rows[0][0]), 1);
  EXPECT_EQ(int64_of(rows[1][0]), 2);
  EXPECT_EQ(rows[0][0].dtype, DType::kInt64);
}

TEST_P(ClientModes, ARefusedOverwriteLeavesNoStagedBytesBehind) {
  auto client = make_client();
  const BatchMeta put = client->put_new("p", {int64_column("x", {1, 2})}, {});
  const StorageStats before = client->storage_stats();
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             client->put_existing(put, {float_column("x", {9.f, 9.f})}, {});
                           },
                           {"dtype conflict"}));
  EXPECT_EQ(client->storage_stats().bytes, before.bytes);
  EXPECT_EQ(client->storage_stats().overhead_bytes, before.overhead_bytes);
}

// Partitions commit one by one: when the second refuses, the first stays
// committed (readers see its new values, not a missing version) and the
// second keeps its old ones.
TEST_P(ClientModes, AnOverwriteRefusedInOnePartitionKeepsWhatAnotherCommitted) {
  auto client = make_client();
  const BatchMeta a = client->put_new("a", {int64_column("x", {1, 2})}, {});
  const BatchMeta b = client->put_new("b", {float_column("x", {3.f, 4.f})}, {});
  const BatchMeta* parts[] = {&a, &b};
  const BatchMeta both = BatchMeta::concat(parts, false);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             client->put_existing(both, {int64_column("x", {10, 20, 30, 40})}, {});
                           },
                           {"dtype conflict"}));
  const std::string fields[] = {"x"};
  MetaRequest request;
  request.fields = {"x"};
  request.batch_size = 2;
  request.partition_id = "a";
  request.mode = MetaMode::kForceFetch;
  const auto rows = client->get_data(client->get_meta(request), fields);
  EXPECT_EQ(int64_of(rows[0][0]), 10);
  EXPECT_EQ(int64_of(rows[1][0]), 20);
  const auto old = client->get_data(b, fields);
  EXPECT_EQ(old[0][0].dtype, DType::kFloat32);
}

TEST_P(ClientModes, KeyValueCallsTouchBothPlanes) {
  auto client = make_client();
  const std::vector<std::string> keys = {"a", "b"};
  const std::vector<Value> tags = {{{"score", 1}}, {{"score", 2}}};
  const BatchMeta put = client->kv_put("kv", keys, tags, {int64_column("x", {5, 6})});
  EXPECT_EQ(put.custom_meta[1]["score"], 2);
  const BatchMeta meta = client->kv_meta("kv", keys);
  const std::string fields[] = {"x"};
  EXPECT_EQ(int64_of(client->get_data(meta, fields)[1][0]), 6);

  const std::vector<std::string> missing = {"a", "zz"};
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { client->kv_meta("kv", missing); }, {"'zz'"}));

  // A failing put removes the keys it created and keeps the known ones,
  // their tags as they were.
  const std::vector<std::string> mixed = {"a", "new"};
  const std::vector<Value> mixed_tags = {{{"score", 99}, {"extra", true}}, {{"score", 100}}};
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             client->kv_put("kv", mixed, mixed_tags, {float_column("x", {1.f, 2.f})});
                           },
                           {"dtype conflict"}));
  const std::string kv = "kv";
  ASSERT_EQ(client->control().kv_list(&kv).at(0).size(), 2u);
  EXPECT_EQ(client->control().kv_list(&kv).at(0).tag(0), (Value{{"score", 1}}));
  // A bad tag fails before anything changes, named by its key.
  const std::vector<Value> bad_tags = {{{"total_lengths", -1}}, Value::object()};
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             client->kv_put("kv", mixed, bad_tags, {int64_column("x", {7, 8})});
                           },
                           {"tags[0] (key 'a')", "total_lengths"}));
  EXPECT_EQ(client->control().kv_list(&kv).at(0).size(), 2u);
  EXPECT_EQ(int64_of(client->get_data(client->kv_meta("kv", keys), fields)[0][0]), 5);
  // A put that succeeds merges its tags into the known keys' ones.
  const std::vector<Value> merged_tags = {{{"extra", true}}, Value()};
  client->kv_put("kv", mixed, merged_tags, {int64_column("x", {7, 8})});
  EXPECT_EQ(client->control().kv_list(&kv).at(0).tag(0), (Value{{"score", 1}, {"extra", true}}));
  EXPECT_EQ(client->control().kv_list(&kv).at(0).tag(2), Value::object());
  const std::vector<std::string> added = {"new"};
  client->kv_clear("kv", added);
  EXPECT_EQ(client->storage_stats().samples, 2u);

  // Keys, or a partition, that do not exist are skipped.
  const std::vector<std::string> one = {"a", "gone"};
  client->kv_clear("kv", one);
  client->kv_clear("nowhere", one);
  EXPECT_EQ(client->storage_stats().samples, 1u);
  const auto listed = client->control().kv_list(nullptr);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].partition_id(), "kv");
  ASSERT_EQ(listed[0].size(), 1u);
  EXPECT_EQ(listed[0].key(0), "b");
  EXPECT_EQ(listed[0].tag(0), (Value{{"score", 2}}));
  EXPECT_TRUE(client->control().kv_list(&one[1]).empty());
}

// A remote client holds its last kv_list answer and the controller answers
// "unchanged" instead of sending the keys again: every change, made through
// any client or by a controller restarted from a checkpoint, still shows.
TEST_P(RemoteModes, KvListShowsEveryChangeMadeThroughAnyClient) {
  auto cluster = std::make_shared<RemoteCluster>(GetParam().storage_units);
  auto lister = cluster->client();
  auto writer = cluster->client();
  auto listing = [&](const std::string* partition) {
    std::map<std::string, Value> out;
    for (const PartitionKeys& listed : lister->control().kv_list(partition)) {
      EXPECT_FALSE(listed.is_unchanged());  // the client answers with the listing it holds
      out[listed.partition_id()];
      for (size_t i = 0; i < listed.size(); ++i)
        out[listed.partition_id() + "/" + std::string(listed.key(i))] = listed.tag(i);
    }
    return out;
  };
  const std::string p = "p";
  const std::vector<std::string> ab = {"a", "b"};
  const std::vector<Value> ab_tags = {{{"s", 1}}, {{"s", 2}}}, a_tags = {{{"s", 3}}};
  writer->kv_put(p, ab, ab_tags, {int64_column("x", {1, 2})});
  const auto first = lister->control().kv_list(&p);
  EXPECT_EQ(lister->control().kv_list(&p), first);
  EXPECT_EQ(listing(nullptr), (std::map<std::string, Value>{{"p", nullptr}, {"p/a", {{"s", 1}}}, {"p/b", {{"s", 2}}}}));

  const std::vector<std::string> a = {"a"};
  writer->kv_put(p, a, a_tags, {int64_column("x", {3})});
  EXPECT_EQ(listing(&p).at("p/a"), (Value{{"s", 3}}));
  writer->kv_clear(p, a);
  EXPECT_EQ(listing(&p), (std::map<std::string, Value>{{"p", nullptr}, {"p/b", {{"s", 2}}}}));
  const std::vector<std::string> q_keys = {"z"};
  writer->kv_put("q", q_keys, {}, {int64_column("x", {4})});
  EXPECT_EQ(listing(nullptr).size(), 4u);  // p, p/b, q, q/z

  // One directory per mode and process: ctest runs the modes in parallel.
  const std::string checkpoint =
      (std::filesystem::temp_directory_path() /
       ("seqflow_kv_list_restart_" + std::string(GetParam().name) + "_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(checkpoint);
  writer->save_checkpoint(checkpoint, Value::object());
  writer->kv_clear("q", q_keys);
  EXPECT_EQ(listing(nullptr), (std::map<std::string, Value>{{"p", nullptr}, {"p/b", {{"s", 2}}}, {"q", nullptr}}));
  cluster->restart_controller(checkpoint);  // back to before the clear of q/z
  EXPECT_EQ(listing(nullptr).count("q/z"), 1u);
  writer = cluster->client();  // once every unit is back
  writer->control().clear_partition(p);
  EXPECT_TRUE(lister->control().kv_list(&p).empty());
  EXPECT_EQ(listing(nullptr).count("p"), 0u);
  std::filesystem::remove_all(checkpoint);
}

// The status calls of a partition that does not exist (never made, or
// cleared) answer "nothing" in both modes, as TransferQueue's do; clears and
// resets of it do nothing; a waiting fetch waits for it to be made and filled.
TEST_P(ClientModes, PartitionThatDoesNotExistIsEmptyNotAnError) {
  auto client = make_client();
  client->put_new("gone", {int64_column("x", {1})}, {});
  client->clear_partition("gone");
  const std::string x[] = {"x"};
  const int64_t samples[] = {0};
  for (const std::string partition : {"gone", "never"}) {
    SCOPED_TRACE(partition);
    EXPECT_FALSE(client->control().consumption_status("t", partition).has_value());
    EXPECT_FALSE(client->control().production_status(x, partition).has_value());
    EXPECT_FALSE(client->control().all_consumed("t", partition));
    EXPECT_FALSE(client->control().all_produced(x, partition));
    client->clear_partition(partition);
    client->clear_samples(partition, samples, {});
    client->control().reset_consumption(partition, nullptr);
    EXPECT_EQ(client->get_meta(fetch_request(partition, "t", {"x"}, 1)).size(), 0u);
    MetaRequest force = fetch_request(partition, "t", {"x"}, 1);
    force.mode = MetaMode::kForceFetch;
    EXPECT_EQ(client->get_meta(force).size(), 0u);
  }
  EXPECT_TRUE(client->control().partition_list().empty());

  MetaRequest waiting = fetch_request("later", "t", {"x"}, 2);
  waiting.polling = false;
  waiting.timeout = std::chrono::milliseconds(20000);
  std::optional<BatchMeta> fetched;
  std::jthread consumer([&] { fetched = client->get_meta(waiting); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const BatchMeta put = client->put_new("later", {int64_column("x", {4, 5})}, {});
  consumer.join();
  ASSERT_TRUE(fetched.has_value());
  EXPECT_EQ(fetched->global_indexes, put.global_indexes);

  waiting.partition_id = "never";
  waiting.timeout = std::chrono::milliseconds(100);
  EXPECT_TRUE(throws_error(ErrorCode::kTimeout, [&] { client->get_meta(waiting); }, {"'never'", "not created"}));
}

// As TransferQueue: every sample, produced or not; production per field.
TEST_P(ClientModes, ForceFetchAndProductionStatusShowUnproducedSamples) {
  auto client = make_client();
  const BatchMeta first = client->put_new("p", {int64_column("x", {1, 2})}, {});
  client->put_existing(first, {int64_column("y", {3, 4})}, {});
  const BatchMeta second = client->put_new("p", {int64_column("x", {5})}, {});
  MetaRequest force = fetch_request("p", "", {"y", "x"}, 0);
  force.mode = MetaMode::kForceFetch;
  const BatchMeta all = client->get_meta(force);
  EXPECT_EQ(all.global_indexes,
            (std::vector<int64_t>{first.global_indexes[0], first.global_indexes[1], second.global_indexes[0]}));
  EXPECT_EQ(all.production_status, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));  // fields x, y by name
  const std::string fields[] = {"y", "never", "x"};
  const auto status = client->control().production_status(fields, "p");
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->global_indexes, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(status->produced, (std::vector<uint8_t>{1, 0, 1, 1, 0, 1, 0, 0, 1}));
}

TEST_P(ClientModes, CheckpointRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("ckpt");
  auto client = make_client();
  client->put_new("p", {int64_column("x", {1, 2, 3})}, lengths_meta({4, 5, 6}));
  client->get_meta(fetch_request("p", "train", {"x"}, 1));  // one consumed
  const Value user_metadata = {{"step", 12}, {"note", "after rollout"}};
  client->save_checkpoint(path, user_metadata);
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(path) / "manifest.json"));
  // TransferQueue's metadata.json, with the caller's metadata.
  std::ifstream metadata_file(std::filesystem::path(path) / "metadata.json");
  const Value metadata =
      parse_json_text(std::string(std::istreambuf_iterator<char>(metadata_file), {}), kMaxDecodeNesting);
  EXPECT_EQ(metadata, (Value{{"storage_saved", true}, {"user_metadata", user_metadata}}));

  auto restored = make_client();
  restored->put_new("other", {int64_column("y", {9})}, {});
  EXPECT_EQ(restored->load_checkpoint(path), user_metadata);
  EXPECT_FALSE(has_partition(*restored, "other"));
  const auto consumed = test::consumed(restored->control(), "train", "p");
  EXPECT_EQ(std::count_if(consumed.begin(), consumed.end(), [](auto& e) { return e.second; }), 1);
  const BatchMeta rest = restored->get_meta(fetch_request("p", "train", {"x"}, 2));
  ASSERT_EQ(rest.size(), 2u);
  const std::string fields[] = {"x"};
  const auto rows = restored->get_data(rest, fields);
  EXPECT_EQ(int64_of(rows[0][0]) + int64_of(rows[1][0]), 2 + 3);
  EXPECT_EQ(rest.custom_meta[0]["total_lengths"].as_int() + rest.custom_meta[1]["total_lengths"].as_int(), 5 + 6);

  // Saving again replaces the directory as a whole.
  restored->clear_partition("p");
  restored->save_checkpoint(path, Value::object());
  auto empty = make_client();
  EXPECT_EQ(empty->load_checkpoint(path), Value::object());
  EXPECT_TRUE(empty->control().partition_list().empty());
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { empty->save_checkpoint(path, Value::array()); },
                           {"metadata", "object"}));
}

TEST_P(ClientModes, BadCheckpointsLeaveTheStateUnchanged) {
  TempDir dir;
  auto client = make_client();
  client->put_new("p", {int64_column("x", {1, 2})}, {});
  const auto check_unchanged = [&] {
    EXPECT_EQ(partition_size(*client, "p"), 2u);
    EXPECT_EQ(client->storage_stats().samples, 2u);
  };

  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { client->load_checkpoint(dir.file("missing")); },
                           {"missing", "does not exist"}));
  check_unchanged();

  const std::string good = dir.file("good");
  auto other = make_client();
  other->put_new("q", {int64_column("x", {7})}, {});
  other->save_checkpoint(good, Value::object());

  // A truncated storage file: caught by the manifest before anything changes.
  const std::string truncated = dir.file("truncated");
  std::filesystem::copy(good, truncated);
  std::filesystem::resize_file(std::filesystem::path(truncated) / "storage.ckpt", 10);
  EXPECT_TRUE(
      throws_error(ErrorCode::kInvalidArgument, [&] { client->load_checkpoint(truncated); }, {"corrupt", "storage"}));
  check_unchanged();

  // Flipped bytes of the same size: the storage file's own check fails after
  // the controller was loaded, which is then put back.
  const std::string flipped = dir.file("flipped");
  std::filesystem::copy(good, flipped);
  {
    std::fstream file(std::filesystem::path(flipped) / "storage.ckpt", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-12, std::ios::end);  // inside the value, before the trailing checksum
    file.write("\xff\xfe\xfd", 3);
  }
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { client->load_checkpoint(flipped); }, {}));
  check_unchanged();
  EXPECT_FALSE(has_partition(*client, "q"));

  // A corrupt metadata.json: refused before anything changes.
  const std::string bad_metadata = dir.file("bad_metadata");
  std::filesystem::copy(good, bad_metadata);
  std::filesystem::resize_file(std::filesystem::path(bad_metadata) / "metadata.json", 3);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { client->load_checkpoint(bad_metadata); },
                           {"corrupt", "metadata"}));
  check_unchanged();

  // No manifest: no checkpoint there; and never overwritten by a save.
  const std::string foreign = dir.file("foreign");
  std::filesystem::create_directory(foreign);
  std::ofstream(std::filesystem::path(foreign) / "notes.txt") << "mine";
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { client->load_checkpoint(foreign); },
                           {"no checkpoint", "manifest.json", "metadata.json"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { client->save_checkpoint(foreign, Value::object()); },
                           {"not a seqflow checkpoint"}));
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(foreign) / "notes.txt"));
  check_unchanged();

  // Files of two saves of the same size mixed in one directory (custom_meta
  // of one save, tensors of another): refused before anything changes.
  const std::string later = dir.file("later");
  const std::vector<Value> meta_later = {{{"score", 2}}}, meta_good = {{{"score", 1}}};
  other->clear_partition("q");
  other->put_new("q", {int64_column("x", {8})}, meta_later);
  other->save_checkpoint(later, Value{{"step", 2}});
  other->clear_partition("q");
  other->put_new("q", {int64_column("x", {7})}, meta_good);
  other->save_checkpoint(good, Value{{"step", 1}});
  // Remote, storage.ckpt indexes the units' files, which the units check.
  const char* data_file = GetParam().storage_units == 0 ? "storage.ckpt" : "storage.ckpt.unit0";
  for (const char* file : {data_file, "controller.ckpt", "metadata.json"}) {
    SCOPED_TRACE(file);
    const std::string mixed = dir.file(std::string("mixed_") + file);
    std::filesystem::copy(good, mixed);
    const auto from = std::filesystem::path(later) / file, to = std::filesystem::path(mixed) / file;
    ASSERT_EQ(std::filesystem::file_size(from), std::filesystem::file_size(to)) << "the test needs equal sizes";
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
    EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { client->load_checkpoint(mixed); },
                             {"mixes saves", file, "fingerprint"}));
    check_unchanged();
    EXPECT_FALSE(has_partition(*client, "q"));
  }
  EXPECT_EQ(client->load_checkpoint(good), (Value{{"step", 1}}));  // the unmixed one loads
  EXPECT_TRUE(has_partition(*client, "q"));
}

}  // namespace
}  // namespace seqflow::test
