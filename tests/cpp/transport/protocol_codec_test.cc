// The protocols' codecs: what an encoder writes its decoder reads back, and
// the checks a decoder makes that no service or client repeats.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "storage_test_support.h"
#include "transport/control_protocol.h"
#include "transport/storage_protocol.h"
#include "wire_test_support.h"

namespace seqflow::test {
namespace {

namespace control = transport::control;
namespace storage_protocol = transport::storage_protocol;
using transport::Frames;

TEST(ControlProtocol, InsertKeepsItsBudgetAndRefusesOneOutOfRange) {
  const control::InsertRequest back =
      control::decode_insert_request(control::encode_insert_request({"p", 3, std::chrono::milliseconds(250)}));
  EXPECT_EQ(back.partition_id, "p");
  EXPECT_EQ(back.count, 3);
  EXPECT_EQ(back.budget, std::chrono::milliseconds(250));
  EXPECT_FALSE(control::decode_insert_request(control::encode_insert_request({"p", 3, std::nullopt})).budget);
  EXPECT_TRUE(throws_error(
      ErrorCode::kInvalidArgument,
      [] {
        control::decode_insert_request(message_of(Tree{{"partition_id", "p"}, {"count", 1}, {"budget_ms", 0}}));
      },
      {"insert request", "budget_ms"}));
}

TEST(ControlProtocol, SharedShapesNameTheirOpInErrors) {
  EXPECT_TRUE(throws_error(
      ErrorCode::kInvalidArgument,
      [] {
        control::decode_samples_request(message_of(Tree{{"partition_id", "p"}}), control::kReclaimUnproduced);
      },
      {"reclaim_unproduced request", "indexes"}));
  EXPECT_TRUE(
      throws_error(ErrorCode::kInvalidArgument,
                   [] {
                     control::decode_flag_reply(message_of(Tree{{"value", true}}), control::kForgetPartitionIfEmpty);
                   },
                   {"forget_partition_if_empty reply", "value"}));
}

TEST(ControlProtocol, FingerprintsMustBeUnsignedIntegers) {
  EXPECT_EQ(control::decode_fingerprints_reply(control::encode_fingerprints_reply({0, uint64_t{1} << 63}),
                                               control::kSaveStorage),
            (std::vector<uint64_t>{0, uint64_t{1} << 63}));
  EXPECT_TRUE(throws_error(
      ErrorCode::kInvalidArgument,
      [] {
        control::decode_load_storage_request(message_of(Tree{{"path", "x"}, {"fingerprints", Tree::array({"1"})}}), 1);
      },
      {"load_storage request", "fingerprints"}));
  EXPECT_TRUE(throws_error(
      ErrorCode::kInvalidArgument,
      [] {
        control::decode_load_storage_request(control::encode_load_storage_request({"x", {1, 2}, false}), 3);
      },
      {"load_storage request", "fingerprints", "one fingerprint per storage unit (3)"}));
  EXPECT_EQ(control::decode_load_storage_request(control::encode_load_storage_request({"x", {}, true}), 3).path, "x");
}

TEST(ControlProtocol, RegistrationKeepsUnsignedIdsAndItsReplyNamesTheIncarnation) {
  const control::RegisterStorageRequest back = control::decode_register_storage_request(
      control::encode_register_storage_request({"tcp://a:1", uint64_t{1} << 63, "t", 5, 3}));
  EXPECT_EQ(back.instance, uint64_t{1} << 63);
  EXPECT_EQ(back.incarnation, 5u);
  EXPECT_EQ(back.protocol, 3);
  EXPECT_EQ(control::decode_register_storage_request(
                control::encode_register_storage_request({"tcp://a:1", std::nullopt, "t", std::nullopt, std::nullopt}))
                .protocol,
            std::nullopt);
  EXPECT_TRUE(
      throws_error(ErrorCode::kInvalidArgument,
                   [] {
                     control::decode_register_storage_request(message_of(Tree{{"endpoint", ""}, {"admin_token", "t"}}));
                   },
                   {"register_storage request", "endpoint", "empty"}));
  const Frames listing = control::encode_storage_units_reply({{"tcp://a:1"}, 1, std::nullopt});
  EXPECT_EQ(control::decode_storage_units_reply(listing, control::kStorageUnits).units,
            std::vector<std::string>{"tcp://a:1"});
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] { control::decode_storage_units_reply(listing, control::kRegisterStorage); },
                           {"register_storage reply", "incarnation"}));
}

TEST(ControlProtocol, RepliesAreCheckedAgainstWhatWasAsked) {
  SampleProduction production;
  production.exists = {1, 1};
  production.generations = {1, 2};
  production.produced = {1, 0, 1, 1};
  production.write_version = 3;
  const Frames reply = control::encode_sample_production_reply(production);
  EXPECT_EQ(control::decode_sample_production_reply(reply, 2, 2).produced, production.produced);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { control::decode_sample_production_reply(reply, 2, 3); },
                           {"produced"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [] { control::decode_kv_keys_reply(control::encode_kv_keys_reply({"a"}), 2); },
                           {"kv_keys reply", "1 keys for 2"}));
}

// A replay_pass request carrying DAPO values, its three arrays as a peer may send them.
Tree replay_request_with_values(std::vector<std::string> uids, std::vector<int64_t> counts,
                                std::vector<double> values) {
  const Tree options{{"mode", "async"},
                     {"strategy", "drop"},
                     {"group_filter_metric", "reward"},
                     {"evict", true},
                     {"refill_failed_groups", false},
                     {"max_inflight_prompts", 0},
                     {"gen_batch_size", 1}};
  const Tree cursor{{"refill_credit", 0},
                    {"draining", false},
                    {"stale", 0},
                    {"stale_span_sum", 0},
                    {"stale_span_max", 0},
                    {"stale_span_min", 0},
                    {"filtered", 0},
                    {"filtered_values", Tree::numbers(std::vector<double>{})},
                    {"filtered_groups", Tree::numbers(std::vector<int64_t>{})},
                    {"failed", 0},
                    {"surplus", 0}};
  return Tree{{"partition_id", "train"},
              {"global_steps", 1},
              {"batch_size", 1},
              {"step", "sample"},
              {"options", options},
              {"cursor", cursor},
              {"wait_ms", 0},
              {"group_value_uids", Tree::strings(uids)},
              {"group_value_counts", Tree::numbers(counts)},
              {"group_values", Tree::numbers(values)}};
}

TEST(ControlProtocol, ReplayGroupValuesComeBackAndCountsThatDoNotAddUpAreRefusedNamingTheUid) {
  ReplayRequest request;
  request.partition_id = "train";
  request.batch_size = 1;
  request.options.group_filter_metric = "acc";
  request.group_values = {{"a", {0.5, 0.5}}, {"b", {}}, {"c", {1.0}}};
  const ReplayRequest back = control::decode_replay_pass_request(control::encode_replay_pass_request(request));
  EXPECT_EQ(back.options.group_filter_metric, std::optional<std::string>("acc"));
  EXPECT_EQ(back.group_values, request.group_values);

  const auto refused = [](std::vector<std::string> uids, std::vector<int64_t> counts, std::vector<double> values,
                          const std::vector<std::string>& named) {
    return throws_error(
        ErrorCode::kInvalidArgument,
        [&] { control::decode_replay_pass_request(message_of(replay_request_with_values(uids, counts, values))); },
        named);
  };
  EXPECT_TRUE(refused({"a"}, {-1}, {}, {"group_value_counts", "-1", "'a'"}));
  EXPECT_TRUE(refused({"a", "b"}, {1, 2}, {0.5, 0.5}, {"group_value_counts", "2", "'b'", "1 are left"}));
  EXPECT_TRUE(refused({"a"}, {1}, {0.5, 0.5}, {"group_values", "holds 2"}));
  EXPECT_TRUE(refused({"a", "b"}, {1}, {0.5}, {"group_value_counts", "1 counts for 2 uids"}));
}

TEST(StorageProtocol, AdminRequestsKeepTheirToken) {
  const storage_protocol::ClearRequest clear =
      storage_protocol::decode_clear_request(storage_protocol::encode_clear_request({{4, 9}, {1, 2}, "t"}));
  EXPECT_EQ(clear.indexes, (std::vector<int64_t>{4, 9}));
  EXPECT_EQ(clear.generations, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(clear.admin_token, "t");
  const storage_protocol::LoadRequest load = storage_protocol::decode_load_request(
      storage_protocol::encode_load_request({"f", 7, true, std::nullopt, 1, 2, {"e", "f"}}));
  EXPECT_EQ(load.fingerprint, 7u);
  EXPECT_TRUE(load.check_only);
  EXPECT_EQ(load.unit, 1u);
  EXPECT_EQ(load.units, 2u);
  EXPECT_EQ(load.parts, (std::vector<std::string>{"e", "f"}));
  for (const storage_protocol::LoadRequest& wrong :
       {storage_protocol::LoadRequest{"f", 7, true, std::nullopt, 0, 2, {"e", "f"}},
        storage_protocol::LoadRequest{"f", 7, true, std::nullopt, 2, 2, {"e", "f"}},
        storage_protocol::LoadRequest{"f", 7, true, std::nullopt, 1, 3, {"e", "f"}}}) {
    EXPECT_THROW(storage_protocol::decode_load_request(storage_protocol::encode_load_request(wrong)), Error)
        << "a part list that does not place the unit's own part at its unit";
  }
  EXPECT_FALSE(load.admin_token);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [] {
                             storage_protocol::decode_save_reply(message_of(Tree{{"fingerprint", -1}}));
                           },
                           {"save reply", "fingerprint"}));
}

TEST(StorageProtocol, LeasesTravelSignedAndComeBackUnsigned) {
  const uint64_t lease = uint64_t{1} << 63;
  EXPECT_EQ(storage_protocol::decode_release_request(storage_protocol::encode_release_request(lease)), lease);
  Frames reply;
  reply.push_back(storage_protocol::encode_get_reply_header({Tree::array().bytes(), std::nullopt, lease}));
  EXPECT_EQ(storage_protocol::decode_get_reply(reply).lease, lease);
}

TEST(StorageProtocol, StatsMustNotBeNegative) {
  const StorageStats stats = storage_protocol::decode_stats_reply(storage_protocol::encode_stats_reply({3, 24, 100}));
  EXPECT_EQ(stats.bytes, 24u);
  EXPECT_TRUE(throws_error(
      ErrorCode::kInvalidArgument,
      [] {
        storage_protocol::decode_stats_reply(message_of(Tree{{"samples", -1}, {"bytes", 0}, {"overhead_bytes", 0}}));
      },
      {"stats reply", "samples"}));
}

TEST(ControlProtocol, WatchRequestsAndAnswersComeBackWhole) {
  const WatchRequest request{"p", {"u1", "status"}, 42, 16, std::chrono::milliseconds(500)};
  const WatchRequest back = control::decode_watch_request(control::encode_watch_request(request));
  EXPECT_EQ(back.partition_id, request.partition_id);
  EXPECT_EQ(back.filter, request.filter);
  EXPECT_EQ(back.cursor, request.cursor);
  EXPECT_EQ(back.max_changes, request.max_changes);
  EXPECT_EQ(back.wait, request.wait);
  WatchBatch batch;
  batch.changes = {{ChangeKind::kInserted, 4, "u1", Value{{"status", "running"}}},
                   {ChangeKind::kProduced, 9, std::nullopt, std::nullopt},
                   {ChangeKind::kPartitionCleared, -1, std::nullopt, std::nullopt}};
  batch.cursor = uint64_t{1} << 63;
  batch.resync = false;
  EXPECT_EQ(control::decode_watch_reply(control::encode_watch_reply(batch)), batch);
}

TEST(ControlProtocol, AWatchAnswerWithUnknownKindsOrUnevenColumnsIsRefused) {
  const auto answer = [](Tree kinds, const std::vector<int64_t>& indexes) {
    return message_of(Tree{{"kinds", std::move(kinds)},
                           {"global_indexes", Tree::numbers(indexes)},
                           {"keys", Tree::strings({"k"})},
                           {"tags", Tree::array({Tree()})},
                           {"cursor", uint64_t{1}},
                           {"resync", false}});
  };
  EXPECT_NO_THROW(control::decode_watch_reply(answer(Tree::strings({"tagged"}), {3})));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] { control::decode_watch_reply(answer(Tree::strings({"renamed"}), {3})); },
                           {"watch reply", "kinds", "renamed"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             control::decode_watch_reply(answer(Tree::strings({"tagged"}), {3, 4}));
                           },
                           {"watch reply", "global_indexes"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] { control::decode_watch_reply(answer(Tree::strings({"tagged"}), {-2})); },
                           {"watch reply", "global_indexes", "-2"}));
}

}  // namespace
}  // namespace seqflow::test
