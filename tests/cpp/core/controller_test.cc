// Controller: indexes, production, consumption, modes, schema, custom_meta,
// clearing, status, the KV API, errors that change nothing, and the cost of
// a fetch as consumed history grows.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <stdexcept>

#include "controller_test_support.h"
#include "core/scan_counter.h"
#include "seqflow/controller.h"
#include "seqflow/sampler.h"

namespace seqflow {
namespace {

using std::chrono::milliseconds;
using test::fetch_request;
using test::fields_of;
using test::put;
using test::snapshot;
using test::sorted;
using test::temp_path;
using test::TempFile;
using test::throws_code;

TEST(ControllerTest, IndexesAreUniqueAcrossPartitionsAndReusedSmallestFirst) {
  Controller controller;
  const BatchMeta a = controller.insert("a", 4);
  const BatchMeta b = controller.insert("b", 3);
  EXPECT_EQ(a.global_indexes, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(b.global_indexes, (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(a.partition_ids.to_vector(), std::vector<std::string>(4, "a"));
  const std::vector<int64_t> drop = {2, 0};
  EXPECT_EQ(controller.clear_samples("a", drop, {}), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(controller.insert("b", 3).global_indexes, (std::vector<int64_t>{0, 2, 7}));
  EXPECT_EQ(controller.clear_partition("b"), (std::vector<int64_t>{0, 2, 4, 5, 6, 7}));
  EXPECT_EQ(controller.partition_list(), std::vector<std::string>{"a"});
  EXPECT_EQ(controller.insert("c", 2).global_indexes, (std::vector<int64_t>{0, 2}));
}

// Oldest first, as TransferQueue lists them (programs clear "all but the
// newest N"), also after a checkpoint; a partition made again is the newest.
TEST(ControllerTest, PartitionsAreListedInTheOrderTheyWereMade) {
  Controller controller;
  for (const char* name : {"step_9", "step_10", "a", "step_11"}) controller.insert(name, 1);
  controller.clear_partition("a");
  controller.kv_resolve("a", std::vector<std::string>{"k"}, {});
  const std::vector<std::string> expected = {"step_9", "step_10", "step_11", "a"};
  EXPECT_EQ(controller.partition_list(), expected);
  std::vector<std::string> listed;
  for (const PartitionKeys& partition : controller.kv_list(nullptr)) listed.push_back(partition.partition_id());
  EXPECT_EQ(listed, expected);
  const TempFile checkpoint("creation_order");
  controller.save(checkpoint.path());
  Controller restored;
  restored.load(checkpoint.path());
  EXPECT_EQ(restored.partition_list(), expected);
}

TEST(ControllerTest, FetchHandsEachSampleOncePerTask) {
  Controller controller;
  const auto indexes = put(controller, "p", 6, {"x", "y"});
  const BatchMeta first = controller.get_meta(fetch_request("p", "actor", {"x"}, 4));
  EXPECT_EQ(first.global_indexes, (std::vector<int64_t>{0, 1, 2, 3}));
  ASSERT_EQ(first.field_schema.size(), 1u);
  EXPECT_EQ(first.field_schema.at("x"), test::tensor_schema());
  EXPECT_EQ(first.production_status, std::vector<uint8_t>(4, 1));
  // Two left: too few for 4 in polling mode.
  EXPECT_EQ(controller.get_meta(fetch_request("p", "actor", {"x"}, 4)).size(), 0u);
  EXPECT_EQ(controller.get_meta(fetch_request("p", "actor", {"x"}, 2)).global_indexes, (std::vector<int64_t>{4, 5}));
  // Another task consumes independently.
  EXPECT_EQ(controller.get_meta(fetch_request("p", "ref", {"x", "y"}, 6)).global_indexes, indexes);
  EXPECT_TRUE(controller.all_consumed("actor", "p"));
  EXPECT_TRUE(controller.all_consumed("ref", "p"));
  EXPECT_FALSE(controller.all_consumed("critic", "p"));
}

// The listener is told after the change is made: an op never reports a
// failure for a change that stands (say, a replay pass's released samples
// lost with its reply), so a listener that throws ends the process.
TEST(ControllerDeathTest, AListenerThatThrowsTerminatesInsteadOfFailingADoneChange) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Controller controller;
        controller.on_change([](const std::string*) { throw std::runtime_error("listener failed"); });
        put(controller, "p", 2, {"x"});
      },
      "listener failed");
}

// A fetched batch that reached nobody goes back to the task, in arrival
// order, and only to that task; a sample cleared and reused since is not
// given back, and the listener hears of the change.
TEST(ControllerTest, GiveBackMakesABatchUnconsumedInArrivalOrder) {
  Controller controller;
  std::vector<std::string> changes;
  controller.on_change([&](const std::string* partition) { changes.push_back(partition ? *partition : "*"); });
  put(controller, "p", 6, {"x"});
  const BatchMeta first = controller.get_meta(fetch_request("p", "actor", {"x"}, 2));
  const BatchMeta middle = controller.get_meta(fetch_request("p", "actor", {"x"}, 2));
  EXPECT_EQ(controller.get_meta(fetch_request("p", "ref", {"x"}, 6)).size(), 6u);
  changes.clear();
  EXPECT_EQ(controller.give_back("p", "actor", middle.global_indexes, middle.generations), 2u);
  EXPECT_EQ(controller.give_back("p", "actor", first.global_indexes, first.generations), 2u);
  EXPECT_EQ(changes, (std::vector<std::string>{"p", "p"}));
  EXPECT_EQ(controller.give_back("p", "actor", first.global_indexes, first.generations), 0u) << "given back twice";
  EXPECT_EQ(controller.get_meta(fetch_request("p", "actor", {"x"}, 6)).global_indexes,
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(controller.all_consumed("ref", "p"));
  EXPECT_EQ(controller.give_back("p", "critic", first.global_indexes, {}), 0u) << "a task that never fetched";

  // Cleared and reused: another sample now, not given back.
  controller.clear_samples("p", first.global_indexes, first.generations);
  put(controller, "p", 2, {"x"});
  const BatchMeta reused = controller.get_meta(fetch_request("p", "actor", {"x"}, 2));
  ASSERT_EQ(reused.global_indexes, first.global_indexes);
  EXPECT_EQ(controller.give_back("p", "actor", first.global_indexes, first.generations), 0u);
  EXPECT_EQ(controller.get_meta(fetch_request("p", "actor", {"x"}, 1)).size(), 0u);
}

TEST(ControllerTest, LastGenerationsOutliveTheRelease) {
  Controller controller;
  const BatchMeta first = controller.insert("p", 2);
  controller.clear_partition("p");
  EXPECT_EQ(controller.last_generations(first.global_indexes), first.generations);
  const BatchMeta again = controller.insert("p", 1);
  ASSERT_EQ(again.global_indexes.front(), first.global_indexes.front());
  EXPECT_EQ(controller.last_generations(again.global_indexes), again.generations);
  const std::vector<int64_t> never = {2};
  EXPECT_TRUE(throws_code([&] { controller.last_generations(never); }, ErrorCode::kInvalidArgument,
                          {"global index 2", "never handed out"}));
}

TEST(ControllerTest, ReadyNeedsEveryRequestedField) {
  Controller controller;
  const BatchMeta inserted = controller.insert("p", 3);
  const std::vector<int64_t> first_two = {inserted.global_indexes[0], inserted.global_indexes[1]};
  controller.mark_produced("p", inserted.global_indexes, {}, fields_of({"x"}), {});
  controller.mark_produced("p", first_two, {}, fields_of({"y"}), {});
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x", "y"}, 3)).size(), 0u);
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x", "y"}, 2)).global_indexes, first_two);
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"never"}, 1)).size(), 0u);
  const std::vector<std::string> xy = {"x", "y"};
  EXPECT_EQ(test::produced_all(controller, xy, "p"),
            (std::vector<std::pair<int64_t, bool>>{{0, true}, {1, true}, {2, false}}));
  // Per field too; a field the partition never had is produced nowhere.
  const std::vector<std::string> y_never_x = {"y", "never", "x"};
  const auto per_field = controller.production_status(y_never_x, "p");
  ASSERT_TRUE(per_field.has_value());
  EXPECT_EQ(per_field->global_indexes, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(per_field->field_count, 3u);
  EXPECT_EQ(per_field->produced, (std::vector<uint8_t>{1, 0, 1, 1, 0, 1, 0, 0, 1}));
  EXPECT_FALSE(controller.all_produced(xy, "p"));
  const std::vector<std::string> x = {"x"};
  EXPECT_TRUE(controller.all_produced(x, "p"));
}

// As TransferQueue: every sample, also those lacking a requested field
// (their production_status says so), whatever was consumed; consumes nothing.
TEST(ControllerTest, ForceFetchReturnsEverySampleAndConsumesNothing) {
  Controller controller;
  put(controller, "p", 3, {"x"});
  controller.insert("p", 2);  // not produced
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 2)).size(), 2u);
  MetaRequest request = fetch_request("p", "t", {"x"}, 1);
  request.mode = MetaMode::kForceFetch;
  const BatchMeta all = controller.get_meta(request);
  EXPECT_EQ(all.global_indexes, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  ASSERT_EQ(all.field_schema.size(), 1u);
  EXPECT_EQ(all.production_status, (std::vector<uint8_t>{1, 1, 1, 0, 0}));
  request.fields = {"x", "never"};  // a field no sample has: not in the schema
  const BatchMeta unknown_field = controller.get_meta(request);
  EXPECT_EQ(unknown_field.size(), 5u);
  EXPECT_EQ(unknown_field.field_schema.count("never"), 0u);
  request.fields.clear();
  EXPECT_EQ(controller.get_meta(request).size(), 5u);
  EXPECT_EQ(test::consumed(controller, "t", "p"),
            (std::vector<std::pair<int64_t, bool>>{{0, true}, {1, true}, {2, false}, {3, false}, {4, false}}));
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 1)).global_indexes, (std::vector<int64_t>{2}));
}

// TransferQueue's programs poll, check, clear and reset partitions that do
// not exist yet or any more: none of that is an error.
TEST(ControllerTest, PartitionThatDoesNotExistIsEmptyNotAnError) {
  Controller controller;
  put(controller, "p", 2, {"x"});
  controller.kv_resolve("p", std::vector<std::string>{"k"}, {});
  controller.clear_partition("p");
  const std::string before = snapshot(controller);
  const std::vector<std::string> x = {"x"};
  const std::vector<std::string> keys = {"k"};
  const std::vector<int64_t> indexes = {0, 1};
  for (const std::string partition : {"p", "never"}) {
    SCOPED_TRACE(partition);
    EXPECT_EQ(controller.get_meta(fetch_request(partition, "t", {"x"}, 1)).size(), 0u);  // polls
    MetaRequest force = fetch_request(partition, "t", {"x"}, 1);
    force.mode = MetaMode::kForceFetch;
    force.polling = false;
    EXPECT_EQ(controller.get_meta(force).size(), 0u);
    EXPECT_FALSE(controller.consumption_status("t", partition).has_value());
    EXPECT_FALSE(controller.production_status(x, partition).has_value());
    EXPECT_FALSE(controller.all_consumed("t", partition));
    EXPECT_FALSE(controller.all_produced(x, partition));
    EXPECT_TRUE(controller.kv_list(&partition).empty());
    EXPECT_TRUE(controller.kv_clear(partition, keys).empty());
    EXPECT_TRUE(controller.clear_samples(partition, indexes, {}).empty());
    EXPECT_TRUE(controller.clear_partition(partition).empty());
    controller.reset_consumption(partition, nullptr);
    const SampleProduction production = controller.sample_production(partition, indexes, {}, x);
    EXPECT_EQ(production.exists, (std::vector<uint8_t>{0, 0}));
  }
  EXPECT_TRUE(controller.partition_list().empty());
  EXPECT_EQ(snapshot(controller), before);
  EXPECT_TRUE(throws_code([&] { controller.kv_lookup("p", keys); }, ErrorCode::kNotFound, {"'p'"}));
}

// Clearing what is gone already skips it: a second clear, a stale key.
TEST(ControllerTest, ClearsSkipWhatIsGoneAlready) {
  Controller controller;
  const auto indexes = put(controller, "p", 3, {"x"});
  controller.kv_resolve("p", std::vector<std::string>{"a", "b"}, {});
  const std::vector<int64_t> first_two = {indexes[0], indexes[1]};
  EXPECT_EQ(controller.clear_samples("p", first_two, {}), first_two);
  const std::vector<int64_t> again = {indexes[1], indexes[2], 99};
  EXPECT_EQ(controller.clear_samples("p", again, {}), (std::vector<int64_t>{indexes[2]}));
  EXPECT_EQ(controller.kv_clear("p", std::vector<std::string>{"a", "gone"}), (std::vector<int64_t>{3}));
  EXPECT_TRUE(controller.kv_clear("p", std::vector<std::string>{"a"}).empty());
  // Keys are listed in the order they were made, as in TransferQueue.
  controller.kv_resolve("p", std::vector<std::string>{"z", "b", "m"}, {});
  const std::string p_name = "p";
  const auto listed_in_order = controller.kv_list(&p_name);
  const std::vector<std::string> order = test::keys_of(listed_in_order.at(0));
  EXPECT_EQ(order, (std::vector<std::string>{"b", "z", "m"}));
  EXPECT_EQ(controller.kv_clear("p", std::vector<std::string>{"z", "m"}).size(), 2u);
  // The emptied partition stays listed, with no keys, as in TransferQueue.
  EXPECT_EQ(controller.partition_list(), std::vector<std::string>{"p"});
  const std::string p = "p";
  const auto listed = controller.kv_list(&p);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].partition_id(), "p");
  ASSERT_EQ(listed[0].size(), 1u);
  EXPECT_EQ(listed[0].key(0), "b");
  EXPECT_TRUE(throws_code([&] { controller.kv_clear("p", std::vector<std::string>{""}); }, ErrorCode::kInvalidArgument,
                          {"keys[0]", "empty"}));
}

TEST(ControllerTest, InsertModeAllocatesBatchSizeSamples) {
  Controller controller;
  MetaRequest request;
  request.mode = parse_meta_mode("insert");
  request.partition_id = "p";
  request.batch_size = 5;
  const BatchMeta meta = controller.get_meta(request);
  EXPECT_EQ(meta.global_indexes, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  ASSERT_EQ(meta.custom_meta.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(meta.custom_meta[i], Value::object());
  EXPECT_EQ(parse_meta_mode("fetch"), MetaMode::kFetch);
  EXPECT_EQ(parse_meta_mode("force_fetch"), MetaMode::kForceFetch);
}

TEST(ControllerTest, CustomMetaIsMergedAndHandedOutWithTheSample) {
  Controller controller;
  const BatchMeta inserted = controller.insert("p", 2);
  const std::vector<Value> meta = {{{"total_lengths", 10}, {"tag", "a"}}, {{"total_lengths", 20}}};
  controller.mark_produced("p", inserted.global_indexes, {}, fields_of({"x"}), meta);
  const std::vector<Value> update = {{{"tag", "b"}}, {{"score", 0.5}}};
  controller.set_custom_meta("p", inserted.global_indexes, {}, update);
  const BatchMeta fetched = controller.get_meta(fetch_request("p", "t", {"x"}, 2));
  EXPECT_EQ(fetched.custom_meta[0], (Value{{"total_lengths", 10}, {"tag", "b"}}));
  EXPECT_EQ(fetched.custom_meta[1], (Value{{"total_lengths", 20}, {"score", 0.5}}));
}

TEST(ControllerTest, FieldSchemaMergesShapesAndRejectsConflicts) {
  Controller controller;
  const auto first = controller.insert("p", 1).global_indexes;
  const auto second = controller.insert("p", 1).global_indexes;
  controller.mark_produced("p", first, {}, {{"r", test::tensor_schema({8, 2})}}, {});
  controller.mark_produced("p", second, {}, {{"r", test::tensor_schema({5, 2})}}, {});
  MetaRequest request = fetch_request("p", "t", {"r"}, 1);
  request.mode = MetaMode::kForceFetch;
  const FieldSchema merged = controller.get_meta(request).field_schema.at("r");
  EXPECT_TRUE(merged.is_nested);
  EXPECT_EQ(merged.shape, (Shape{-1, 2}));
  EXPECT_EQ(merged.dtype, DType::kFloat32);

  const std::string before = snapshot(controller);
  EXPECT_TRUE(throws_code(
      [&] {
        controller.mark_produced("p", second, {}, {{"r", test::tensor_schema({5, 2}, DType::kInt64)}}, {});
      },
      ErrorCode::kInvalidArgument, {"'r'", "dtype conflict", "float32", "int64"}));
  EXPECT_TRUE(throws_code(
      [&] {
        controller.mark_produced("p", second, {}, {{"r", test::tensor_schema({5})}}, {});
      },
      ErrorCode::kInvalidArgument, {"'r'", "inconsistent shapes"}));
  EXPECT_TRUE(throws_code(
      [&] {
        controller.mark_produced("p", second, {}, {{"r", test::tensor_schema({-1, 2})}}, {});
      },
      ErrorCode::kInvalidArgument, {"'r'", "is_nested is false"}));
  FieldSchema object;
  object.is_object = true;
  EXPECT_TRUE(throws_code(
      [&] {
        controller.mark_produced("p", second, {}, {{"r", object}}, {});
      },
      ErrorCode::kInvalidArgument, {"'r'", "objects"}));
  EXPECT_EQ(snapshot(controller), before);
}

// Every rejected call leaves every observable bit as it was.
TEST(ControllerTest, BadInputIsRejectedAndChangesNothing) {
  Controller controller(ControllerOptions{make_rank_aware_sampler(), false});
  const auto indexes = put(controller, "p", 4, {"x"}, test::lengths_meta({1, 2, 3, 4}));
  controller.kv_resolve("p", std::vector<std::string>{"k"}, {});
  controller.get_meta(fetch_request("p", "t", {"x"}, 1));
  const std::vector<int64_t> one = {indexes[1]};
  controller.clear_samples("p", one, {});
  const std::string before = snapshot(controller);

  const std::vector<int64_t> mixed = {indexes[0], indexes[1]};  // indexes[1] is cleared
  const std::vector<int64_t> live = {indexes[0], indexes[2]};
  const ErrorCode invalid = ErrorCode::kInvalidArgument;
  const ErrorCode not_found = ErrorCode::kNotFound;
  const ErrorCode stale = ErrorCode::kStaleSample;
  struct Case {
    const char* what;
    std::function<void()> call;
    ErrorCode code;
    std::vector<std::string_view> fragments;
  };
  const std::vector<Case> cases = {
      {"empty partition_id", [&] { controller.get_meta(fetch_request("", "t", {"x"}, 1)); }, invalid, {"partition_id"}},
      {"batch_size 0", [&] { controller.get_meta(fetch_request("p", "t", {"x"}, 0)); }, invalid, {"batch_size", "0"}},
      {"negative batch_size insert",
       [&] {
         MetaRequest r = fetch_request("p", "t", {"x"}, -3);
         r.mode = MetaMode::kInsert;
         controller.get_meta(r);
       },
       invalid,
       {"batch_size", "-3"}},
      {"unknown mode",
       [&] {
         MetaRequest r = fetch_request("p", "t", {"x"}, 1);
         r.mode = static_cast<MetaMode>(7);
         controller.get_meta(r);
       },
       invalid,
       {"mode", "7"}},
      {"unknown mode name", [&] { parse_meta_mode("fetchall"); }, invalid, {"mode", "fetchall"}},
      {"negative dp_rank",
       [&] { controller.get_meta(fetch_request("p", "t", {"x"}, 1, -1)); },
       invalid,
       {"dp_rank", "-1"}},
      {"empty task", [&] { controller.get_meta(fetch_request("p", "", {"x"}, 1)); }, invalid, {"task_name"}},
      {"mark cleared sample",
       [&] {
         controller.mark_produced("p", mixed, {}, fields_of({"x", "z"}), {});
       },
       stale,
       {"global index 1", "'p'"}},
      {"mark in unknown partition",
       [&] { controller.mark_produced("q", live, {}, fields_of({"x"}), {}); },
       stale,
       {"'q'"}},
      {"meta count",
       [&] { controller.mark_produced("p", live, {}, fields_of({"z"}), test::lengths_meta({1})); },
       invalid,
       {"custom_meta", "1 entries for 2 samples"}},
      {"meta not an object",
       [&] {
         controller.mark_produced("p", live, {}, fields_of({"z"}), std::vector<Value>{Value::object(), 5});
       },
       invalid,
       {"custom_meta[1]", "global index 2", "object"}},
      {"bad total_lengths",
       [&] {
         controller.set_custom_meta("p", live, {},
                                    std::vector<Value>{{{"total_lengths", 1}}, {{"total_lengths", "x"}}});
       },
       invalid,
       {"global index 2", "total_lengths"}},
      {"structured group_id",
       [&] {
         controller.set_custom_meta("p", live, {},
                                    std::vector<Value>{Value::object(), {{"group_id", Value::array({1})}}});
       },
       invalid,
       {"group_id"}},
      {"set meta on cleared sample",
       [&] {
         controller.set_custom_meta("p", mixed, {}, test::lengths_meta({1, 1}));
       },
       stale,
       {"global index 1"}},
      {"set meta in unknown partition",
       [&] {
         controller.set_custom_meta("q", live, {}, test::lengths_meta({1, 1}));
       },
       stale,
       {"'q'"}},
      {"kv missing key",
       [&] {
         controller.kv_lookup("p", std::vector<std::string>{"k", "nope"});
       },
       not_found,
       {"key 'nope'"}},
      {"kv clear empty key",
       [&] {
         controller.kv_clear("p", std::vector<std::string>{"k", ""});
       },
       invalid,
       {"keys[1]", "empty"}},
      {"kv bad tag",
       [&] {
         controller.kv_resolve("p", std::vector<std::string>{"new", "k"},
                               std::vector<Value>{Value::object(), {{"total_lengths", -4}}});
       },
       invalid,
       {"total_lengths"}},
      {"kv bad tag in new partition",
       [&] { controller.kv_resolve("fresh", std::vector<std::string>{"a"}, std::vector<Value>{Value(3)}); },
       invalid,
       {"tags[0]", "'a'"}},
      {"insert 0", [&] { controller.insert("fresh", 0); }, invalid, {"count", "0"}},
      {"load missing checkpoint", [&] { controller.load(temp_path("does_not_exist")); }, not_found, {"does_not_exist"}},
      {"forget production in unknown partition",
       [&] {
         const std::string q = "q";
         controller.forget_production(&q, [](int64_t) { return true; });
       },
       not_found,
       {"partition_id", "'q'"}},
      {"forget production without a selector",
       [&] { controller.forget_production(nullptr, {}); },
       invalid,
       {"lost", "empty function"}},
      {"forget production with a failing selector",
       [&] {
         int calls = 0;
         controller.forget_production(nullptr, [&](int64_t index) {
           if (++calls == 2) throw_invalid("selector failed at global index " + std::to_string(index));
           return true;
         });
       },
       invalid,
       {"selector failed"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_TRUE(throws_code(c.call, c.code, c.fragments));
    EXPECT_EQ(snapshot(controller), before);
  }
  EXPECT_EQ(controller.partition_list(), std::vector<std::string>{"p"});
}

TEST(ControllerTest, ClearSamplesForgetsThemEverywhere) {
  Controller controller;
  const auto indexes = put(controller, "p", 4, {"x"});
  const std::vector<int64_t> drop = {indexes[1], indexes[1], indexes[2]};
  EXPECT_EQ(controller.clear_samples("p", drop, {}), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 2)).global_indexes, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(controller.all_consumed("t", "p"));
  EXPECT_EQ(test::consumed(controller, "t", "p"), (std::vector<std::pair<int64_t, bool>>{{0, true}, {3, true}}));
}

TEST(ControllerTest, ForgetProductionHidesSamplesUntilTheyAreProducedAgain) {
  Controller controller;
  std::vector<Value> meta;
  for (int64_t i = 0; i < 6; ++i) meta.push_back({{"id", i}});
  const auto p = put(controller, "p", 6, {"x", "y"}, meta);  // indexes 0..5
  const auto q = put(controller, "q", 4, {"x"});             // indexes 6..9
  controller.insert("p", 2);                                 // 10, 11: nothing produced
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 2)).global_indexes, (std::vector<int64_t>{0, 1}));

  // Every even index of every partition lost its data; only those that had
  // a field produced are reported.
  const auto even = [](int64_t index) { return index % 2 == 0; };
  EXPECT_EQ(controller.forget_production(nullptr, even), (std::vector<int64_t>{0, 2, 4, 6, 8}));
  const std::vector<std::string> x = {"x"}, y = {"y"};
  using Status = std::vector<std::pair<int64_t, bool>>;
  EXPECT_EQ(test::produced_all(controller, x, "p"),
            (Status{{0, false}, {1, true}, {2, false}, {3, true}, {4, false}, {5, true}, {10, false}, {11, false}}));
  EXPECT_EQ(test::produced_all(controller, y, "p"), test::produced_all(controller, x, "p"));
  EXPECT_EQ(test::produced_all(controller, x, "q"), (Status{{6, false}, {7, true}, {8, false}, {9, true}}));
  EXPECT_FALSE(controller.all_produced(x, "q"));
  // Not served by fetch (3 and 5 only, so a batch of 3 is not ready);
  // force_fetch shows them not produced; consumption, custom_meta and
  // schemas stay.
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 3)).size(), 0u);
  MetaRequest everything = fetch_request("p", "", {"x"}, 0);
  everything.mode = MetaMode::kForceFetch;
  const BatchMeta forced = controller.get_meta(everything);
  EXPECT_EQ(forced.global_indexes, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 10, 11}));
  EXPECT_EQ(forced.production_status, (std::vector<uint8_t>{0, 1, 0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(test::consumed(controller, "t", "p"),
            (Status{{0, true}, {1, true}, {2, false}, {3, false}, {4, false}, {5, false}, {10, false}, {11, false}}));
  EXPECT_EQ(controller.forget_production(nullptr, even), std::vector<int64_t>{}) << "nothing left to forget";

  // Put again: ready again, with their custom_meta; the consumed sample 0 is
  // not served to t a second time.
  const std::vector<int64_t> lost = {p[0], p[2], p[4]};
  controller.mark_produced("p", lost, {}, fields_of({"x"}), {});
  const BatchMeta again = controller.get_meta(fetch_request("p", "t", {"x"}, 4));
  EXPECT_EQ(sorted(again.global_indexes), (std::vector<int64_t>{2, 3, 4, 5}));
  for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(again.custom_meta[i]["id"], again.global_indexes[i]);
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 1)).size(), 0u);
  EXPECT_EQ(controller.get_meta(fetch_request("p", "u", {"x", "y"}, 3)).global_indexes, (std::vector<int64_t>{1, 3, 5}))
      << "y was not put again";

  // One partition only.
  const std::string only_q = "q";
  EXPECT_EQ(controller.forget_production(&only_q, [](int64_t) { return true; }), (std::vector<int64_t>{q[1], q[3]}));
  EXPECT_EQ(test::produced_all(controller, x, "p")[1], (std::pair<int64_t, bool>{1, true}));
}

TEST(ControllerTest, AReservedAnswerWaitsUntilItsForgottenSamplesAreProducedAgain) {
  // rank_aware: every caller of (dp_rank, batch_index) gets the samples the
  // first one reserved; the later ones must not get samples whose data is gone.
  Controller controller(ControllerOptions{make_rank_aware_sampler(), false});
  const auto indexes = put(controller, "p", 4, {"x"});
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 2)).global_indexes, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(controller.forget_production(nullptr, [](int64_t index) { return index == 1; }), std::vector<int64_t>{1});
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 2)).size(), 0u);
  MetaRequest blocking = fetch_request("p", "t", {"x"}, 2);
  blocking.polling = false;
  blocking.timeout = milliseconds(50);
  EXPECT_TRUE(throws_code([&] { controller.get_meta(blocking); }, ErrorCode::kTimeout, {"timed out"}));
  const std::vector<int64_t> lost = {indexes[1]};
  controller.mark_produced("p", lost, {}, fields_of({"x"}), {});
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 2)).global_indexes, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 2, 1)).global_indexes, (std::vector<int64_t>{2, 3}));
}

// Only an answer that consumed exactly what it holds, with nothing kept in
// a sampler's reservations, may be given back when it reaches nobody.
TEST(ControllerTest, OnlyAnAnswerNoSamplerKeepsIsReturnable) {
  Controller sequential;
  put(sequential, "p", 4, {"x"});
  bool returnable = false;
  ASSERT_EQ(sequential.try_get_meta(fetch_request("p", "t", {"x"}, 2), &returnable)->size(), 2u);
  EXPECT_TRUE(returnable);
  ASSERT_EQ(sequential.try_get_meta(fetch_request("p", "t", {"x"}, 4), &returnable)->size(), 0u);
  EXPECT_FALSE(returnable) << "an empty poll consumed nothing";

  Controller rank_aware(ControllerOptions{make_rank_aware_sampler(), false});
  put(rank_aware, "p", 4, {"x"});
  returnable = true;
  ASSERT_EQ(rank_aware.try_get_meta(fetch_request("p", "t", {"x"}, 2), &returnable)->size(), 2u);
  EXPECT_FALSE(returnable) << "the sampler keeps the answer for this rank's other callers";
  returnable = true;
  ASSERT_EQ(rank_aware.try_get_meta(fetch_request("p", "t", {"x"}, 2), &returnable)->size(), 2u);
  EXPECT_FALSE(returnable) << "a reserved answer";
}

TEST(ControllerTest, ResetConsumptionOfOneTaskOrAll) {
  Controller controller;
  put(controller, "p", 2, {"x"});
  controller.get_meta(fetch_request("p", "a", {"x"}, 2));
  controller.get_meta(fetch_request("p", "b", {"x"}, 2));
  const std::string a = "a";
  controller.reset_consumption("p", &a);
  EXPECT_FALSE(controller.all_consumed("a", "p"));
  EXPECT_TRUE(controller.all_consumed("b", "p"));
  EXPECT_EQ(controller.get_meta(fetch_request("p", "a", {"x"}, 2)).size(), 2u);
  controller.reset_consumption("p", nullptr);
  EXPECT_EQ(controller.get_meta(fetch_request("p", "a", {"x"}, 2)).size(), 2u);
  EXPECT_EQ(controller.get_meta(fetch_request("p", "b", {"x"}, 2)).size(), 2u);
}

TEST(ControllerTest, EmptyPartitionIsNeitherConsumedNorProduced) {
  Controller controller;
  controller.insert("p", 1);
  const std::vector<int64_t> all = {0};
  controller.clear_samples("p", all, {});
  const std::vector<std::string> x = {"x"};
  EXPECT_FALSE(controller.all_consumed("t", "p"));
  EXPECT_FALSE(controller.all_produced(x, "p"));
  EXPECT_TRUE(test::consumed(controller, "t", "p").empty());
  EXPECT_EQ(controller.partition_list(), std::vector<std::string>{"p"}) << "emptied, not removed";
}

TEST(ControllerTest, KeyValueApi) {
  Controller controller;
  const std::vector<std::string> keys = {"a", "b", "a"};
  const std::vector<Value> tags = {{{"total_lengths", 3}}, nullptr, {{"score", 1}}};
  const BatchMeta first = controller.kv_resolve("p", keys, tags);
  EXPECT_EQ(first.global_indexes, (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(first.custom_meta[0], (Value{{"total_lengths", 3}, {"score", 1}}));
  // Known keys keep their sample; new ones get new samples; tags merge.
  const std::vector<std::string> more = {"c", "b"};
  const std::vector<Value> more_tags = {Value::object(), {{"x", true}}};
  EXPECT_EQ(controller.kv_resolve("p", more, more_tags).global_indexes, (std::vector<int64_t>{2, 1}));
  const std::vector<int64_t> produced = {1};
  controller.mark_produced("p", produced, {}, fields_of({"v"}), {});
  const BatchMeta looked = controller.kv_lookup("p", std::vector<std::string>{"b", "a"});
  EXPECT_EQ(looked.global_indexes, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(looked.production_status, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(looked.custom_meta[0], (Value{{"x", true}}));

  controller.kv_resolve("q", std::vector<std::string>{"z"}, {});
  const std::string p = "p";
  const auto listed = controller.kv_list(&p);
  ASSERT_EQ(listed.size(), 1u);
  ASSERT_EQ(listed[0].size(), 3u);
  EXPECT_EQ(listed[0].key(0), "a");
  EXPECT_EQ(listed[0].tag(0), (Value{{"total_lengths", 3}, {"score", 1}}));
  put(controller, "no keys", 1, {"x"});
  const auto every = controller.kv_list(nullptr);  // oldest partition first
  ASSERT_EQ(every.size(), 3u);
  EXPECT_EQ(every[0].partition_id(), "p");
  EXPECT_EQ(every[1].partition_id(), "q");
  EXPECT_EQ(every[1].size(), 1u);
  EXPECT_EQ(every[2].partition_id(), "no keys");
  EXPECT_TRUE(every[2].empty());

  EXPECT_EQ(controller.kv_clear("p", std::vector<std::string>{"a", "c"}), (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(throws_code([&] { controller.kv_lookup("p", std::vector<std::string>{"a"}); }, ErrorCode::kNotFound,
                          {"key 'a'", "'p'"}));
  // Clearing a keyed sample by index forgets its key too.
  const std::vector<int64_t> b = {1};
  controller.clear_samples("p", b, {});
  EXPECT_TRUE(controller.kv_list(&p).at(0).empty());
}

// An asker that holds a partition's current listing is told "unchanged"
// (no keys sent again); every change of a key or a tag, and a partition made
// again under the same name, gives another version.
TEST(ControllerTest, KvListAnswersUnchangedOnlyForTheCurrentVersion) {
  Controller controller;
  const std::string p = "p";
  controller.kv_resolve(p, std::vector<std::string>{"a", "b"}, std::vector<Value>{{{"s", 1}}, {{"s", 2}}});
  std::map<std::string, ListingVersion> known{{p, controller.kv_list(&p).at(0).version()}};
  auto expect_unchanged = [&](const char* after) {
    const PartitionKeys again = controller.kv_list(&p, known).at(0);
    EXPECT_TRUE(again.is_unchanged()) << after;
    EXPECT_TRUE(again.empty()) << after;
    EXPECT_EQ(again.version(), known[p]) << after;
  };
  auto expect_changed = [&](const char* what, size_t keys) {
    const PartitionKeys now = controller.kv_list(&p, known).at(0);
    EXPECT_FALSE(now.is_unchanged()) << what;
    EXPECT_NE(now.version(), known[p]) << what;
    EXPECT_EQ(now.size(), keys) << what;
    known[p] = now.version();
    expect_unchanged(what);
  };
  expect_unchanged("nothing changed");
  put(controller, p, 1, {"x"});  // a sample without a key is not listed
  expect_unchanged("a put without keys");

  controller.kv_resolve(p, std::vector<std::string>{"a"}, std::vector<Value>{{{"s", 3}}});
  expect_changed("a tag merged", 2);
  const std::vector<int64_t> b_index = {controller.kv_lookup(p, std::vector<std::string>{"b"}).global_indexes};
  controller.set_custom_meta(p, b_index, {}, std::vector<Value>{{{"s", 4}}});
  expect_changed("a keyed sample's custom_meta set", 2);
  controller.kv_resolve(p, std::vector<std::string>{"c"}, {});
  expect_changed("a key made", 3);
  controller.kv_clear(p, std::vector<std::string>{"a"});
  expect_changed("a key cleared", 2);
  controller.clear_samples(p, b_index, {});
  expect_changed("a keyed sample cleared by index", 1);

  // The same partition name made again starts another epoch.
  const ListingVersion before = known[p];
  controller.clear_partition(p);
  EXPECT_TRUE(controller.kv_list(&p, known).empty());
  controller.kv_resolve(p, std::vector<std::string>{"c"}, {});
  const PartitionKeys remade = controller.kv_list(&p, known).at(0);
  EXPECT_FALSE(remade.is_unchanged());
  EXPECT_NE(remade.version().epoch, before.epoch);

  // Listing every partition: the known ones unchanged, the others in full.
  controller.kv_resolve("q", std::vector<std::string>{"z"}, {});
  known[p] = remade.version();
  known["gone"] = ListingVersion{1, 1};
  const auto every = controller.kv_list(nullptr, known);
  ASSERT_EQ(every.size(), 2u);
  EXPECT_TRUE(every[0].is_unchanged());
  EXPECT_FALSE(every[1].is_unchanged());
  EXPECT_EQ(every[1].key(0), "z");
}

// try_get_meta never waits: a waiting fetch with too little ready declines
// (nullopt) and consumes nothing; everything else answers as get_meta does.
TEST(ControllerTest, TryGetMetaAnswersWithoutWaitingOrDeclinesConsumingNothing) {
  Controller controller;
  const auto first = put(controller, "p", 2, {"x"});
  MetaRequest waiting = fetch_request("p", "t", {"x"}, 3);
  waiting.polling = false;
  // Only the test's deadline: a fetch that waited would end in kTimeout
  // there (nothing else puts), not decline.
  waiting.timeout = milliseconds(20000);
  EXPECT_FALSE(controller.try_get_meta(waiting).has_value());
  const auto polled = controller.try_get_meta(fetch_request("p", "t", {"x"}, 3));
  ASSERT_TRUE(polled.has_value());
  EXPECT_EQ(polled->size(), 0u) << "a poll with too little ready is an empty batch";

  const auto third = put(controller, "p", 1, {"x"});
  const auto served = controller.try_get_meta(waiting);
  ASSERT_TRUE(served.has_value());
  EXPECT_EQ(served->global_indexes, (std::vector<int64_t>{first[0], first[1], third[0]}));
  EXPECT_FALSE(controller.try_get_meta(waiting).has_value()) << "each sample once per task";

  MetaRequest force = waiting;
  force.mode = MetaMode::kForceFetch;
  EXPECT_EQ(controller.try_get_meta(force)->size(), 3u);
  MetaRequest insert = waiting;
  insert.mode = MetaMode::kInsert;
  insert.batch_size = 4;
  EXPECT_EQ(controller.try_get_meta(insert)->size(), 4u);
  EXPECT_TRUE(throws_code([&] { controller.try_get_meta(fetch_request("p", "t", {"x"}, 0)); },
                          ErrorCode::kInvalidArgument, {"batch_size"}));
}

TEST(ControllerTest, PollingModeIsTheDefaultWhenConfigured) {
  Controller controller(ControllerOptions{nullptr, true});
  controller.insert("p", 1);
  MetaRequest request = fetch_request("p", "t", {"x"}, 1);
  request.polling = false;
  request.timeout = milliseconds(60000);
  EXPECT_EQ(controller.get_meta(request).size(), 0u);
}

// Consumed history must not slow a fetch: it walks unconsumed samples only.
TEST(ControllerTest, FetchNeverVisitsConsumedSamples) {
  Controller controller;
  constexpr int kRounds = 200;
  constexpr int kBatch = 1000;
  for (int round = 0; round < kRounds; ++round) {
    put(controller, "p", kBatch, {"x"});
    ASSERT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, kBatch)).size(), static_cast<size_t>(kBatch));
  }
  put(controller, "p", 10, {"x"});
  controller.insert("p", 5);  // unconsumed but not produced: visited, not ready
  const uint64_t before = detail::fetch_scan_visits;
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 10)).size(), 10u);
  EXPECT_EQ(detail::fetch_scan_visits - before, 15u);
}

// A large backlog of ready samples costs a prefix-stable sampler nothing.
TEST(ControllerTest, FetchWalksOnlyWhatTheSamplerNeeds) {
  Controller controller;
  put(controller, "p", 100000, {"x"});
  const uint64_t before = detail::fetch_scan_visits;
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 8)).size(), 8u);
  EXPECT_LE(detail::fetch_scan_visits - before, 64u);
}

// TransferQueue defect 8: grouping by index contiguity breaks once indexes
// are reused. Groups here are the runs of n within one put call.
TEST(ControllerTest, GroupsFollowPutCallsNotIndexes) {
  Controller controller(ControllerOptions{make_grpo_group_n_sampler(2), false});
  controller.insert("p", 4);  // groups {0, 1} and {2, 3}
  const std::vector<int64_t> hole = {1, 2};
  controller.clear_samples("p", hole, {});
  // This put reuses 1 and 2: indexes {1, 2, 4, 5}, groups {1, 2} and {4, 5}.
  const auto indexes = put(controller, "p", 4, {"x"});
  EXPECT_EQ(indexes, (std::vector<int64_t>{1, 2, 4, 5}));
  const std::vector<int64_t> old = {0, 3};  // each lost its partner
  controller.mark_produced("p", old, {}, fields_of({"x"}), {});
  // Index contiguity would pair {0, 1} and {2, 3}.
  EXPECT_EQ(sorted(controller.get_meta(fetch_request("p", "t", {"x"}, 2)).global_indexes),
            (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(sorted(controller.get_meta(fetch_request("p", "t", {"x"}, 2)).global_indexes),
            (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 2)).size(), 0u);
}

// Hands out whatever the test scripts next.
class ScriptedSampler final : public Sampler {
 public:
  std::string name() const override { return "scripted"; }
  SampleResult sample(const SampleRequest&) override { return next; }
  SampleResult next;
};

// A sampler's bad answer is its bug: kInternal naming it, and nothing consumed.
TEST(ControllerTest, BadSamplerAnswersAreInternalErrorsAndConsumeNothing) {
  auto sampler = std::make_shared<ScriptedSampler>();
  Controller controller(ControllerOptions{sampler, false});
  put(controller, "p", 4, {"x"});  // indexes 0..3
  const auto fetch = [&] { return controller.get_meta(fetch_request("p", "t", {"x"}, 1)); };
  const auto unconsumed = [&] {
    std::vector<int64_t> out;
    for (const auto& [index, consumed] : test::consumed(controller, "t", "p")) {
      if (!consumed) out.push_back(index);
    }
    return out;
  };
  sampler->next = {{0, 1}, {0, 1}};
  EXPECT_EQ(fetch().global_indexes, (std::vector<int64_t>{0, 1}));

  const std::vector<std::pair<SampleResult, std::string>> bugs = {
      {{{2, 0}, {2, 0}}, "returned global index 0, which is not an unconsumed sample of partition 'p'"},
      {{{2, 2}, {2, 2}}, "sampler 'scripted' consumed a sample twice"},
      {{{99}, {99}}, "returned global index 99, which is not a live sample"},
      {{{2}, {3, 77}}, "returned global index 77, which is not an unconsumed sample"},
      {{{2}, {3, 1}}, "returned global index 1, which is not an unconsumed sample"},
      {{{2}, {3, 3}}, "consumed a sample twice"},
  };
  for (const auto& [answer, message] : bugs) {
    sampler->next = answer;
    EXPECT_TRUE(throws_code(fetch, ErrorCode::kInternal, {"sampler 'scripted'", message})) << message;
    EXPECT_EQ(unconsumed(), (std::vector<int64_t>{2, 3})) << message;
  }
  // Handing out a sample without consuming it, or consuming others, is allowed.
  sampler->next = {{0}, {}};
  EXPECT_EQ(fetch().global_indexes, (std::vector<int64_t>{0}));
  sampler->next = {{3}, {2, 3}};
  EXPECT_EQ(fetch().global_indexes, (std::vector<int64_t>{3}));
  EXPECT_TRUE(unconsumed().empty());
}

}  // namespace
}  // namespace seqflow
