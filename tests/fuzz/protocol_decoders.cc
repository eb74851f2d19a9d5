#include "protocol_decoders.h"

#include <chrono>

#include "sample_keys_support.h"
#include "seqflow/storage.h"
#include "transport/control_protocol.h"
#include "transport/storage_protocol.h"
#include "transport/wire_codec.h"
#include "wire_test_support.h"

namespace seqflow::test {
namespace {

namespace control = transport::control;
namespace storage_protocol = transport::storage_protocol;
namespace wire = transport::wire;
using transport::Frames;

const std::vector<int64_t> kIndexes = {4, 1, 9};
const std::vector<size_t> kAll = {0, 1, 2};
// A waiting put's ticket (storage_protocol.h).
constexpr StorageUnit::Ticket kTicket = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

BatchMeta seed_meta() {
  BatchMeta meta;
  meta.global_indexes = kIndexes;
  meta.generations = {17, 3, uint64_t{1} << 62};
  meta.partition_ids.append(3, "train");
  meta.field_schema["a"] = FieldSchema{DType::kFloat32, {2}, false, false};
  meta.production_status = {1, 0, 1};
  for (size_t i = 0; i < 3; ++i) meta.custom_meta.push_back(Value::object());
  return meta;
}

control::SamplesRequest seed_samples() { return {"train", kIndexes, {1, 1, 2}}; }

MetaRequest seed_meta_request() {
  MetaRequest request;
  request.fields = {"a"};
  request.batch_size = 8;
  request.partition_id = "train";
  request.task_name = "t";
  return request;
}

// A storage unit's reading of a put request: its header, then its columns in segments.
void take_put_request(Frames& f, size_t, size_t) {
  const storage_protocol::PutRequest request = storage_protocol::decode_put_request(f);
  Frames taken = copies(f);  // take_column_segments takes the data frames over
  wire::take_column_segments(request.columns, taken, 1, request.segment_samples, request.samples.global_indexes.size(),
                             "put request");
}

// Field "x": one int64 per sample of kIndexes, its global index.
Column seed_column() {
  Column column;
  column.field = "x";
  column.dtype = DType::kInt64;
  column.shapes = {{1}};
  column.offsets = {0, 8, 16, 24};
  column.buffer = Buffer::copy_of(std::as_bytes(std::span(kIndexes)));
  return column;
}

// The data frames of a get reply of seed_column() for kIndexes.
// A sample pass of 2 groups at global step 7 in partition "train".
ReplayRequest seed_replay_request(int64_t wait_ms) {
  ReplayRequest request;
  request.partition_id = "train";
  request.global_steps = 7;
  request.batch_size = 2;
  request.wait_ms = wait_ms;
  return request;
}

Frames seed_get_reply() {
  StorageUnit storage;
  const TestSamples samples = samples_of(kIndexes);
  storage.put(samples, {seed_column()});
  const std::string fields[] = {"x"};
  const auto rows = storage.get(samples, fields);
  Frames reply(1);
  const std::string views = wire::append_views(rows, 1, reply);
  reply[0] = storage_protocol::encode_get_reply_header({views, std::nullopt, std::nullopt});
  return reply;
}

}  // namespace

const std::vector<ProtocolDecoder>& protocol_decoders() {
  static const std::vector<ProtocolDecoder> table = {
      // The controller's protocol.
      {"insert request", [](Frames& f, size_t, size_t) { control::decode_insert_request(f); },
       [] {
         return control::encode_insert_request({"train", 3, std::chrono::milliseconds(500)});
       }},
      {"insert reply", [](Frames& f, size_t, size_t) { control::decode_insert_reply(f); },
       [] { return control::encode_insert_reply(seed_meta(), true); }},
      {"get_meta request", [](Frames& f, size_t, size_t) { control::decode_get_meta_request(f); },
       [] { return control::encode_get_meta_request(seed_meta_request()); }},
      {"get_meta request with a lease", [](Frames& f, size_t, size_t) { control::decode_get_meta_request(f); },
       [] {
         MetaRequest request = seed_meta_request();
         request.lease = std::chrono::milliseconds(30000);
         return control::encode_get_meta_request(request);
       }},
      {"batch reply", [](Frames& f, size_t, size_t) { control::decode_batch_reply(f, control::kGetMeta); },
       [] { return control::encode_batch_reply(seed_meta()); }},
      {"batch reply with a lease", [](Frames& f, size_t, size_t) { control::decode_batch_reply(f, control::kGetMeta); },
       [] {
         BatchMeta meta = seed_meta();
         meta.lease = 7;
         return control::encode_batch_reply(meta);
       }},
      {"samples request", [](Frames& f, size_t, size_t) { control::decode_samples_request(f, control::kClearSamples); },
       [] { return control::encode_samples_request(seed_samples()); }},
      {"released reply", [](Frames& f, size_t, size_t) { control::decode_released_reply(f, control::kClearSamples); },
       [] { return control::encode_released_reply(kIndexes); }},
      {"mark_produced request", [](Frames& f, size_t, size_t) { control::decode_mark_produced_request(f); },
       [] {
         return control::encode_mark_produced_request(
             {seed_samples(), seed_meta().field_schema, {Value::object(), {{"k", 1}}, Value()}, 7});
       }},
      {"mark_produced reply", [](Frames& f, size_t rows, size_t) { control::decode_mark_produced_reply(f, rows); },
       [] {
         CommittedWrite committed;
         committed.versions["a"] = {5, 5, 6};
         return control::encode_mark_produced_reply(committed);
       },
       3},
      {"set_custom_meta request", [](Frames& f, size_t, size_t) { control::decode_set_custom_meta_request(f); },
       [] {
         return control::encode_set_custom_meta_request({seed_samples(), {Value::object(), Value(), {{"k", 2}}}});
       }},
      {"sample_production request", [](Frames& f, size_t, size_t) { control::decode_sample_production_request(f); },
       [] {
         return control::encode_sample_production_request({seed_samples(), {"a", "b"}});
       }},
      {"sample_production reply",
       [](Frames& f, size_t rows, size_t fields) { control::decode_sample_production_reply(f, rows, fields); },
       [] {
         SampleProduction production;
         production.field_count = 2;
         production.exists = {1, 1, 0};
         production.generations = {1, 1, 0};
         production.produced = {1, 0, 1, 1, 0, 0};
         production.write_version = 9;
         production.write_tags = {11, 12};
         return control::encode_sample_production_reply(production);
       },
       3, 2},
      {"partition request",
       [](Frames& f, size_t, size_t) { control::decode_partition_request(f, control::kClearPartition); },
       [] { return control::encode_partition_request("train"); }},
      {"forgotten reply",
       [](Frames& f, size_t, size_t) { control::decode_flag_reply(f, control::kForgetPartitionIfEmpty); },
       [] { return control::encode_flag_reply(control::kForgetPartitionIfEmpty, true); }},
      {"value reply", [](Frames& f, size_t, size_t) { control::decode_flag_reply(f, control::kAllConsumed); },
       [] { return control::encode_flag_reply(control::kAllConsumed, false); }},
      {"keys request", [](Frames& f, size_t, size_t) { control::decode_keys_request(f, control::kKvLookup); },
       [] {
         return control::encode_keys_request({"train", {"k1", "", "k3"}});
       }},
      {"reset_consumption request", [](Frames& f, size_t, size_t) { control::decode_reset_consumption_request(f); },
       [] {
         return control::encode_reset_consumption_request({"train", "t"});
       }},
      {"end_leases request", [](Frames& f, size_t, size_t) { control::decode_end_leases_request(f); },
       [] {
         return control::encode_end_leases_request({seed_samples(), "t", true, 7});
       }},
      {"end_leases reply", [](Frames& f, size_t, size_t) { control::decode_end_leases_reply(f); },
       [] { return control::encode_end_leases_reply(3); }},
      {"replay_pass request", [](Frames& f, size_t, size_t) { control::decode_replay_pass_request(f); },
       [] {
         ReplayRequest request = seed_replay_request(50);
         request.options.mode = ReplayMode::kSync;
         request.options.max_off_policy_threshold = 2;
         request.options.group_filter_tag = "reward";
         request.options.max_inflight_prompts = 4;
         request.cursor.refill_credit = 2;
         request.cursor.evictions.filtered_values = {{1.0, 2}};
         return control::encode_replay_pass_request(request);
       }},
      {"replay_pass reply", [](Frames& f, size_t, size_t) { control::decode_replay_pass_reply(f); },
       [] {
         ReplayPass pass;
         pass.ready = true;
         pass.sampleable = 1;
         pass.selected_uids = {"u"};
         pass.keys = {"u_0_0"};
         pass.tags = {Value{{"reward", 1.0}}};
         pass.cursor.evictions.stale = 1;
         pass.cursor.evictions.stale_span_sum = pass.cursor.evictions.stale_span_max = 3;
         pass.released = {4, 9};
         return control::encode_replay_pass_reply(pass);
       }},
      {"watch request", [](Frames& f, size_t, size_t) { control::decode_watch_request(f); },
       [] {
         return control::encode_watch_request({"train", {"u1", "status"}, 42, 16, std::chrono::milliseconds(500)});
       }},
      {"watch reply", [](Frames& f, size_t, size_t) { control::decode_watch_reply(f); },
       [] {
         WatchBatch batch;
         batch.changes = {{ChangeKind::kInserted, 4, "u1", Value{{"status", "running"}}},
                          {ChangeKind::kProduced, 9, std::nullopt, std::nullopt},
                          {ChangeKind::kTagged, 4, "u1", Value{{"status", "finished"}}},
                          {ChangeKind::kCleared, 1, "u2", std::nullopt},
                          {ChangeKind::kPartitionCleared, -1, std::nullopt, std::nullopt},
                          {ChangeKind::kResync, -1, std::nullopt, std::nullopt}};
         batch.cursor = 77;
         return control::encode_watch_reply(batch);
       }},
      {"replay_pass request with group values",
       [](Frames& f, size_t, size_t) { control::decode_replay_pass_request(f); },
       [] {
         ReplayRequest request = seed_replay_request(0);
         request.group_values = {{"u", {0.5, 0.5}}, {"v", {}}};
         request.options.group_filter_metric = "reward";
         return control::encode_replay_pass_request(request);
       }},
      {"replay_pass reply asking for values", [](Frames& f, size_t, size_t) { control::decode_replay_pass_reply(f); },
       [] {
         ReplayPass pass;
         pass.unclassified_keys = {"u_0_0", "u_1_0"};
         return control::encode_replay_pass_reply(pass);
       }},
      {"replay_pass request balanced over ranks",
       [](Frames& f, size_t, size_t) { control::decode_replay_pass_request(f); },
       [] {
         ReplayRequest request = seed_replay_request(0);
         request.options.balance_ranks = 4;
         request.options.balance_workload = "quadratic(1,2)";
         return control::encode_replay_pass_request(request);
       }},
      {"replay_pass reply balanced over ranks", [](Frames& f, size_t, size_t) { control::decode_replay_pass_reply(f); },
       [] {
         ReplayPass pass;
         pass.ready = true;
         pass.keys = {"u_1_0", "u_0_0"};
         pass.tags = {Value{{"seq_len", 9}}, Value{{"seq_len", 3}}};
         pass.rank_sizes = {1, 1};
         pass.rank_lengths = {9, 3};
         pass.arrival_rank_lengths = {3, 9};
         return control::encode_replay_pass_reply(pass);
       }},
      {"replay_pass request with a pass id", [](Frames& f, size_t, size_t) { control::decode_replay_pass_request(f); },
       [] {
         ReplayRequest request = seed_replay_request(0);
         request.pass_id = uint64_t{1} << 62;
         request.lease_ms = 60000;
         return control::encode_replay_pass_request(request);
       }},
      {"replay_pass reply kept", [](Frames& f, size_t, size_t) { control::decode_replay_pass_reply(f); },
       [] {
         ReplayPass pass;
         pass.ready = true;
         pass.selected_uids = {"u"};
         pass.keys = {"u_0_0"};
         pass.tags = {Value{{"reward", 1.0}}};
         pass.kept = true;
         return control::encode_replay_pass_reply(pass);
       }},
      {"replay_pass request with a version staleness",
       [](Frames& f, size_t, size_t) { control::decode_replay_pass_request(f); },
       [] {
         ReplayRequest request = seed_replay_request(0);
         request.options.max_staleness_versions = 2;
         request.options.strategy = StalenessStrategy::kWait;
         return control::encode_replay_pass_request(request);
       }},
      {"replay_pass request with member statuses",
       [](Frames& f, size_t, size_t) { control::decode_replay_pass_request(f); },
       [] {
         ReplayRequest request = seed_replay_request(0);
         request.options.member_status = true;
         return control::encode_replay_pass_request(request);
       }},
      {"replay_pass reply with version evictions",
       [](Frames& f, size_t, size_t) { control::decode_replay_pass_reply(f); },
       [] {
         ReplayPass pass;
         pass.refill = 2;
         pass.cursor.evictions.stale_versions = 2;
         pass.cursor.evictions.stale_versions_age_max = 5;
         pass.released = {4, 9, 11};
         return control::encode_replay_pass_reply(pass);
       }},
      {"replay_pass reply with left-out members",
       [](Frames& f, size_t, size_t) { control::decode_replay_pass_reply(f); },
       [] {
         ReplayPass pass;
         pass.cursor.evictions.left_out_members = 3;
         pass.released = {4, 9, 11};
         return control::encode_replay_pass_reply(pass);
       }},
      {"ack_replay_pass request", [](Frames& f, size_t, size_t) { control::decode_ack_replay_pass_request(f); },
       [] {
         return control::encode_ack_replay_pass_request({"train", 42});
       }},
      {"ack_replay_pass reply", [](Frames& f, size_t, size_t) { control::decode_ack_replay_pass_reply(f); },
       [] {
         return control::encode_ack_replay_pass_reply({true, {4, 9}});
       }},
      {"reissue_inflight_prompts request", [](Frames& f, size_t, size_t) { control::decode_reissue_request(f); },
       [] {
         return control::encode_reissue_request({"train", 12});
       }},
      {"reissue_inflight_prompts request with member statuses",
       [](Frames& f, size_t, size_t) { control::decode_reissue_request(f); },
       [] {
         return control::encode_reissue_request({"train", 12, true});
       }},
      {"reissue_inflight_prompts reply", [](Frames& f, size_t, size_t) { control::decode_reissue_reply(f); },
       [] {
         return control::encode_reissue_reply({{"u", "v"}, 3, {4, 9, 11}});
       }},
      {"task request", [](Frames& f, size_t, size_t) { control::decode_task_request(f, control::kAllConsumed); },
       [] {
         return control::encode_task_request({"t", "train"});
       }},
      {"fields request", [](Frames& f, size_t, size_t) { control::decode_fields_request(f, control::kAllProduced); },
       [] {
         return control::encode_fields_request({{"a", "b"}, "train"});
       }},
      {"consumption_status reply", [](Frames& f, size_t, size_t) { control::decode_consumption_status_reply(f); },
       [] {
         return control::encode_consumption_status_reply(std::vector<std::pair<int64_t, bool>>{{1, true}});
       }},
      {"production_status reply",
       [](Frames& f, size_t, size_t fields) { control::decode_production_status_reply(f, fields); },
       [] {
         return control::encode_production_status_reply(ProductionStatus{{1, 4}, 2, {1, 0, 1, 1}});
       },
       0, 2},
      {"report_timing request", [](Frames& f, size_t, size_t) { control::decode_report_timing_request(f); },
       [] {
         const std::vector<TimingRecord> records = {{{100, 200}, 0.5}, {{}, 0.1}};
         return control::encode_report_timing_request("t", records);
       }},
      {"task_workload request", [](Frames& f, size_t, size_t) { control::decode_task_workload_request(f); },
       [] { return control::encode_task_workload_request("t"); }},
      {"task_workload reply", [](Frames& f, size_t, size_t) { control::decode_task_workload_reply(f, "t"); },
       [] {
         return control::encode_task_workload_reply(TaskWorkload{"t", Workload::tokens(), 4, true});
       }},
      {"bare request", [](Frames& f, size_t, size_t) { control::decode_bare_request(f, control::kPartitionList); },
       [] { return control::encode_bare_request(); }},
      {"partition_list reply", [](Frames& f, size_t, size_t) { control::decode_partition_list_reply(f); },
       [] {
         return control::encode_partition_list_reply({"train", "val"});
       }},
      {"kv_resolve request", [](Frames& f, size_t, size_t) { control::decode_kv_resolve_request(f); },
       [] {
         return control::encode_kv_resolve_request({"train", {"a", "b", "c"}, {Value::object(), Value(), {{"x", 1}}}});
       }},
      {"kv_resolve reply", [](Frames& f, size_t, size_t) { control::decode_kv_resolve_reply(f); },
       [] {
         return control::encode_kv_resolve_reply(seed_meta(), false, {1, 0, 1});
       }},
      {"kv_keys request", [](Frames& f, size_t, size_t) { control::decode_kv_keys_request(f); },
       [] {
         return control::encode_kv_keys_request({"train", kIndexes});
       }},
      {"kv_keys reply", [](Frames& f, size_t rows, size_t) { control::decode_kv_keys_reply(f, rows); },
       [] {
         return control::encode_kv_keys_reply({"a", "b", "c"});
       },
       3},
      {"policy_version message", [](Frames& f, size_t, size_t) { control::decode_policy_version(f, "message"); },
       [] { return control::encode_policy_version(12); }},
      {"policy_versions request", [](Frames& f, size_t, size_t) { control::decode_policy_versions_request(f); },
       [] {
         return control::encode_policy_versions_request({"train", kIndexes, std::nullopt});
       }},
      {"policy_versions request by keys", [](Frames& f, size_t, size_t) { control::decode_policy_versions_request(f); },
       [] {
         return control::encode_policy_versions_request({"train", std::nullopt, std::vector<std::string>{"a", "b"}});
       }},
      {"policy_versions reply", [](Frames& f, size_t rows, size_t) { control::decode_policy_versions_reply(f, rows); },
       [] {
         return control::encode_policy_versions_reply({{0, 2, 5}, {-1, 3, 5}});
       },
       3},
      {"kv_list request", [](Frames& f, size_t, size_t) { control::decode_kv_list_request(f); },
       [] {
         return control::encode_kv_list_request({"train", {{"train", ListingVersion{3, 4}}}});
       }},
      {"kv_list reply",
       [](Frames& f, size_t, size_t) {
         Frames taken = copies(f);  // the decoder takes its frame over
         control::decode_kv_list_reply(taken);
       },
       [] {
         std::vector<PartitionKeys> listed;
         listed.emplace_back("train").push_back("k1", {});
         return control::encode_kv_list_reply(listed);
       }},
      {"path request", [](Frames& f, size_t, size_t) { control::decode_path_request(f, control::kSave); },
       [] { return control::encode_path_request("ckpt/controller"); }},
      {"save_checkpoint request", [](Frames& f, size_t, size_t) { control::decode_save_checkpoint_request(f); },
       [] {
         return control::encode_save_checkpoint_request({"ckpt/controller", "ckpt/storage"});
       }},
      {"fingerprints reply",
       [](Frames& f, size_t, size_t) { control::decode_fingerprints_reply(f, control::kSaveStorage); },
       [] {
         return control::encode_fingerprints_reply({1, uint64_t{1} << 63});
       }},
      {"load_storage request", [](Frames& f, size_t, size_t units) { control::decode_load_storage_request(f, units); },
       [] {
         return control::encode_load_storage_request({"ckpt/storage", {1, 2}, true});
       },
       0, 2},
      {"register_storage request", [](Frames& f, size_t, size_t) { control::decode_register_storage_request(f); },
       [] {
         // A unit that predates protocol versions: still read (then refused).
         return control::encode_register_storage_request(
             {"tcp://127.0.0.1:1", uint64_t{1} << 63, "token", 5, std::nullopt});
       }},
      {"versioned register_storage request",
       [](Frames& f, size_t, size_t) { control::decode_register_storage_request(f); },
       [] {
         return control::encode_register_storage_request(
             {"tcp://127.0.0.1:1", uint64_t{1} << 63, "token", 5, control::kProtocolVersion});
       }},
      {"hello request", [](Frames& f, size_t, size_t) { control::decode_hello(f, "hello request"); },
       [] { return control::encode_hello(control::kProtocolVersion); }},
      {"hello reply", [](Frames& f, size_t, size_t) { control::decode_hello(f, "hello reply"); },
       [] { return control::encode_hello(control::kProtocolVersion); }},
      {"storage_units reply",
       [](Frames& f, size_t, size_t) { control::decode_storage_units_reply(f, control::kStorageUnits); },
       [] {
         return control::encode_storage_units_reply({{"tcp://127.0.0.1:1"}, 2, std::nullopt});
       }},
      {"register_storage reply",
       [](Frames& f, size_t, size_t) { control::decode_storage_units_reply(f, control::kRegisterStorage); },
       [] {
         return control::encode_storage_units_reply({{"tcp://127.0.0.1:1"}, 1, uint64_t{1} << 63});
       }},
      {"control empty reply", [](Frames& f, size_t, size_t) { control::decode_empty_reply(f, control::kSave); },
       [] { return control::encode_empty_reply(); }},
      // The storage units' protocol.
      {"put request", take_put_request,
       [] {
         Frames data;
         const std::string entries = wire::append_columns({seed_column()}, {}, data);
         return storage_protocol::encode_put_request(samples_of(kIndexes), kAll, entries, std::move(data));
       }},
      {"put request in segments", take_put_request,
       [] {
         // Sample 0, then samples 1 and 2: one entry and one frame per segment.
         Frames data;
         std::string entries = "\x92";  // an array of the two segments' entries
         for (const std::vector<size_t>& positions : {std::vector<size_t>{0}, std::vector<size_t>{1, 2}}) {
           entries += array_elements(wire::append_columns({seed_column()}, positions, data), wire::kValueDepth)->at(0);
         }
         const uint64_t segment_samples[] = {1, 2};
         return storage_protocol::encode_put_request(samples_of(kIndexes), kAll, entries, std::move(data), std::nullopt,
                                                     segment_samples);
       }},
      {"retried put request", take_put_request,
       [] {
         Frames data;
         const std::string entries = wire::append_columns({seed_column()}, {}, data);
         return storage_protocol::encode_put_request(samples_of(kIndexes), kAll, entries, std::move(data), kTicket);
       }},
      {"put reply", [](Frames& f, size_t, size_t) { storage_protocol::decode_put_reply(f); },
       [] {
         return storage_protocol::encode_put_reply({"no session", std::nullopt, std::nullopt});
       }},
      {"full put reply", [](Frames& f, size_t, size_t) { storage_protocol::decode_put_reply(f); },
       [] {
         return storage_protocol::encode_put_reply({std::nullopt, "storage full: max_samples is 4", kTicket});
       }},
      {"room request", [](Frames& f, size_t, size_t) { storage_protocol::decode_room_request(f); },
       [] {
         return storage_protocol::encode_room_request({{-7, uint64_t{1} << 63, 12, 3}, kTicket, true});
       }},
      {"room reply", [](Frames& f, size_t, size_t) { storage_protocol::decode_room_reply(f); },
       [] {
         return storage_protocol::encode_room_reply({true, "storage full: max_samples is 4", std::nullopt});
       }},
      {"unplaced room reply", [](Frames& f, size_t, size_t) { storage_protocol::decode_room_reply(f); },
       [] {
         return storage_protocol::encode_room_reply({false, std::nullopt, "no waiting put holds this ticket"});
       }},
      {"get request", [](Frames& f, size_t, size_t) { storage_protocol::decode_get_request(f); },
       [] {
         const std::vector<uint8_t> session(16, 7);
         return storage_protocol::encode_get_request(samples_of(kIndexes), kAll, {"x"}, session);
       }},
      {"get reply",
       [](Frames& f, size_t rows, size_t fields) {
         const storage_protocol::GetReply reply = storage_protocol::decode_get_reply(f);
         Frames taken = copies(f);  // take_views takes the data frames over
         wire::take_views(reply.fields, taken, 1, rows, fields, "get reply");
       },
       seed_get_reply, 3, 1},
      {"commit request",
       [](Frames& f, size_t, size_t) { storage_protocol::decode_settle_request(f, storage_protocol::kCommit); },
       [] {
         const TestSamples held = samples_of(kIndexes);
         SampleKeys samples = held;
         samples.write_version = 2;
         return storage_protocol::encode_settle_request(samples, kAll, {"x"}, 99);
       }},
      {"storage bare request",
       [](Frames& f, size_t, size_t) { storage_protocol::decode_bare_request(f, storage_protocol::kStats); },
       [] { return storage_protocol::encode_bare_request(); }},
      {"local_copy_session reply",
       [](Frames& f, size_t, size_t) { storage_protocol::decode_local_copy_session_reply(f); },
       [] { return storage_protocol::encode_local_copy_session_reply("@seqflow-unit"); }},
      {"release request", [](Frames& f, size_t, size_t) { storage_protocol::decode_release_request(f); },
       [] { return storage_protocol::encode_release_request(uint64_t{1} << 63); }},
      {"release reply", [](Frames& f, size_t, size_t) { storage_protocol::decode_release_reply(f); },
       [] { return storage_protocol::encode_release_reply(true); }},
      {"clear request", [](Frames& f, size_t, size_t) { storage_protocol::decode_clear_request(f); },
       [] {
         return storage_protocol::encode_clear_request({kIndexes, {1, 1, 2}, "token"});
       }},
      {"stats reply", [](Frames& f, size_t, size_t) { storage_protocol::decode_stats_reply(f); },
       [] {
         return storage_protocol::encode_stats_reply(StorageStats{3, 24, 100});
       }},
      {"save request", [](Frames& f, size_t, size_t) { storage_protocol::decode_save_request(f); },
       [] {
         return storage_protocol::encode_save_request({"ckpt/storage.unit0", "token"});
       }},
      {"save reply", [](Frames& f, size_t, size_t) { storage_protocol::decode_save_reply(f); },
       [] { return storage_protocol::encode_save_reply(uint64_t{1} << 63); }},
      {"load request", [](Frames& f, size_t, size_t) { storage_protocol::decode_load_request(f); },
       [] {
         return storage_protocol::encode_load_request({"ckpt/storage.unit0", 5, true, "token", 0, 1, {}});
       }},
      {"load request of one part", [](Frames& f, size_t, size_t) { storage_protocol::decode_load_request(f); },
       [] {
         return storage_protocol::encode_load_request(
             {"ckpt/storage.unit1", 5, false, "token", 1, 2, {"ckpt/storage.unit0", "ckpt/storage.unit1"}});
       }},
      {"storage empty reply",
       [](Frames& f, size_t, size_t) { storage_protocol::decode_empty_reply(f, storage_protocol::kCommit); },
       [] { return storage_protocol::encode_empty_reply(); }},
  };
  return table;
}

}  // namespace seqflow::test
