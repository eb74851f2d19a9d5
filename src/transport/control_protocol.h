// The controller service's protocol, the one place its op names and keys are
// spelled: RemoteControlPlane and ShardedStorage (clients) and the storage
// units (register_storage) encode requests and decode replies here, and
// ControllerService decodes requests and encodes replies here. Each request
// and reply is one header frame (wire_codec.h), plus a BatchMeta frame where
// the reply is a batch. Decoders check every key, type and count and throw
// kInvalidArgument naming the op and the key; ops of one shape share a codec.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqflow/controller.h"
#include "seqflow/limits.h"
#include "seqflow/storage.h"
#include "transport/frames.h"

namespace seqflow::transport::control {

inline constexpr std::string_view kInsert = "insert";
inline constexpr std::string_view kMarkProduced = "mark_produced";
inline constexpr std::string_view kGetMeta = "get_meta";
inline constexpr std::string_view kSetCustomMeta = "set_custom_meta";
inline constexpr std::string_view kClearSamples = "clear_samples";
inline constexpr std::string_view kReclaimUnproduced = "reclaim_unproduced";
inline constexpr std::string_view kClearPartition = "clear_partition";
inline constexpr std::string_view kKvClear = "kv_clear";
inline constexpr std::string_view kForgetPartitionIfEmpty = "forget_partition_if_empty";
inline constexpr std::string_view kResetConsumption = "reset_consumption";
inline constexpr std::string_view kEndLeases = "end_leases";
inline constexpr std::string_view kConsumptionStatus = "consumption_status";
inline constexpr std::string_view kProductionStatus = "production_status";
inline constexpr std::string_view kSampleProduction = "sample_production";
inline constexpr std::string_view kAllConsumed = "all_consumed";
inline constexpr std::string_view kAllProduced = "all_produced";
inline constexpr std::string_view kReportTiming = "report_timing";
inline constexpr std::string_view kTaskWorkload = "task_workload";
inline constexpr std::string_view kPartitionList = "partition_list";
inline constexpr std::string_view kKvResolve = "kv_resolve";
inline constexpr std::string_view kKvLookup = "kv_lookup";
inline constexpr std::string_view kKvFind = "kv_find";
inline constexpr std::string_view kKvKeys = "kv_keys";
inline constexpr std::string_view kKvList = "kv_list";
inline constexpr std::string_view kSave = "save";
inline constexpr std::string_view kLoad = "load";
inline constexpr std::string_view kSaveStorage = "save_storage";
inline constexpr std::string_view kSaveCheckpoint = "save_checkpoint";
inline constexpr std::string_view kLoadStorage = "load_storage";
inline constexpr std::string_view kRegisterStorage = "register_storage";
inline constexpr std::string_view kStorageUnits = "storage_units";
inline constexpr std::string_view kHello = "hello";
inline constexpr std::string_view kReplayPass = "replay_pass";
inline constexpr std::string_view kWatch = "watch";
inline constexpr std::string_view kAckReplayPass = "ack_replay_pass";
inline constexpr std::string_view kSetPolicyVersion = "set_policy_version";
inline constexpr std::string_view kPolicyVersion = "policy_version";
inline constexpr std::string_view kPolicyVersions = "policy_versions";
inline constexpr std::string_view kReissueInflightPrompts = "reissue_inflight_prompts";

// seqflow::kWireProtocolVersion: what hello and register_storage carry.
inline constexpr int64_t kProtocolVersion = kWireProtocolVersion;

// Every op above: the controller service registers exactly these.
inline constexpr std::array kOps{kInsert,
                                 kMarkProduced,
                                 kGetMeta,
                                 kSetCustomMeta,
                                 kClearSamples,
                                 kReclaimUnproduced,
                                 kClearPartition,
                                 kKvClear,
                                 kForgetPartitionIfEmpty,
                                 kResetConsumption,
                                 kEndLeases,
                                 kConsumptionStatus,
                                 kProductionStatus,
                                 kSampleProduction,
                                 kAllConsumed,
                                 kAllProduced,
                                 kReportTiming,
                                 kTaskWorkload,
                                 kPartitionList,
                                 kKvResolve,
                                 kKvLookup,
                                 kKvFind,
                                 kKvKeys,
                                 kKvList,
                                 kSave,
                                 kLoad,
                                 kSaveStorage,
                                 kSaveCheckpoint,
                                 kLoadStorage,
                                 kRegisterStorage,
                                 kStorageUnits,
                                 kHello,
                                 kReplayPass,
                                 kWatch,
                                 kAckReplayPass,
                                 kSetPolicyVersion,
                                 kPolicyVersion,
                                 kPolicyVersions,
                                 kReissueInflightPrompts};

// A reply that carries nothing (an empty map); its decoder checks that.
Frames encode_empty_reply();
void decode_empty_reply(const Frames& reply, std::string_view op);

// Requests and replies that are nothing but a BatchMeta frame (get_meta's
// reply, kv_lookup's, kv_find's).
Frames encode_batch_reply(const BatchMeta& meta);
BatchMeta decode_batch_reply(const Frames& reply, std::string_view op);

// insert: "budget_ms" is how long the client still waits (absent from
// clients that predate it), 1 ms to kMaxInsertBudget.
struct InsertRequest {
  std::string partition_id;
  int64_t count = 0;
  std::optional<std::chrono::milliseconds> budget;
};
Frames encode_insert_request(const InsertRequest& request);
InsertRequest decode_insert_request(const Frames& request);

// insert's and kv_resolve's reply: [the batch, {"created", "made_keys"}],
// whether the call made its partition (a client whose put fails removes
// only a partition it made), and for kv_resolve a flag per key it made.
struct CreatedBatch {
  BatchMeta meta;
  bool created = false;
  std::vector<uint8_t> made_keys;  // kv_resolve only: one per key
};
Frames encode_insert_reply(const BatchMeta& meta, bool created);
CreatedBatch decode_insert_reply(const Frames& reply);
Frames encode_kv_resolve_reply(const BatchMeta& meta, bool created, const std::vector<uint8_t>& made_keys);
CreatedBatch decode_kv_resolve_reply(const Frames& reply);

// get_meta: the MetaRequest, written and read directly (wire_codec.h).
Frames encode_get_meta_request(const MetaRequest& request);
MetaRequest decode_get_meta_request(const Frames& request);

// Samples named by index, with their generations when known (empty: not
// known, a BatchMeta built by hand). clear_samples and reclaim_unproduced
// are just that; mark_produced, set_custom_meta and sample_production add
// their own keys.
struct SamplesRequest {
  std::string partition_id;
  std::vector<int64_t> indexes;
  std::vector<uint64_t> generations;
};
Frames encode_samples_request(const SamplesRequest& request);
SamplesRequest decode_samples_request(const Frames& request, std::string_view op);

// The released indexes: the reply of clear_samples, reclaim_unproduced,
// clear_partition and kv_clear.
Frames encode_released_reply(const std::vector<int64_t>& released);
std::vector<int64_t> decode_released_reply(const Frames& reply, std::string_view op);

struct MarkProducedRequest {
  SamplesRequest samples;
  std::map<std::string, FieldSchema> fields;
  std::vector<Value> custom_meta;
  uint64_t write_version = 0;  // 0: a first write (absent on the wire)
};
Frames encode_mark_produced_request(const MarkProducedRequest& request);
MarkProducedRequest decode_mark_produced_request(const Frames& request);
// The decoder checks every count against the `samples` the request named.
Frames encode_mark_produced_reply(const CommittedWrite& committed);
CommittedWrite decode_mark_produced_reply(const Frames& reply, size_t samples);

struct SetCustomMetaRequest {
  SamplesRequest samples;
  std::vector<Value> custom_meta;
};
Frames encode_set_custom_meta_request(const SetCustomMetaRequest& request);
SetCustomMetaRequest decode_set_custom_meta_request(const Frames& request);

struct SampleProductionRequest {
  SamplesRequest samples;
  std::vector<std::string> fields;
};
Frames encode_sample_production_request(const SampleProductionRequest& request);
SampleProductionRequest decode_sample_production_request(const Frames& request);
// The decoder checks every count against the request's samples and fields.
Frames encode_sample_production_reply(const SampleProduction& production);
SampleProduction decode_sample_production_reply(const Frames& reply, size_t samples, size_t fields);

// A partition alone: clear_partition, forget_partition_if_empty.
Frames encode_partition_request(const std::string& partition_id);
std::string decode_partition_request(const Frames& request, std::string_view op);

// forget_partition_if_empty's reply ("forgotten"), all_consumed's and
// all_produced's ("value"): one boolean.
Frames encode_flag_reply(std::string_view op, bool flag);
bool decode_flag_reply(const Frames& reply, std::string_view op);

// A partition and keys: kv_clear, kv_lookup, kv_find.
struct KeysRequest {
  std::string partition_id;
  std::vector<std::string> keys;
};
Frames encode_keys_request(const KeysRequest& request);
KeysRequest decode_keys_request(const Frames& request, std::string_view op);

struct ResetConsumptionRequest {
  std::string partition_id;
  std::optional<std::string> task_name;  // none: every task
};
Frames encode_reset_consumption_request(const ResetConsumptionRequest& request);
ResetConsumptionRequest decode_reset_consumption_request(const Frames& request);

// end_leases: the task's leases of these samples, acknowledged or released.
struct EndLeasesRequest {
  SamplesRequest samples;
  std::string task_name;
  bool release = false;
  uint64_t lease = 0;  // BatchMeta::lease; 0 (absent on the wire): any
};
Frames encode_end_leases_request(const EndLeasesRequest& request);
EndLeasesRequest decode_end_leases_request(const Frames& request);
// The leases it ended.
Frames encode_end_leases_reply(size_t ended);
size_t decode_end_leases_reply(const Frames& reply);

// A task in a partition: consumption_status, all_consumed.
struct TaskRequest {
  std::string task_name;
  std::string partition_id;
};
Frames encode_task_request(const TaskRequest& request);
TaskRequest decode_task_request(const Frames& request, std::string_view op);

// Fields of a partition: production_status, all_produced.
struct FieldsRequest {
  std::vector<std::string> fields;
  std::string partition_id;
};
Frames encode_fields_request(const FieldsRequest& request);
FieldsRequest decode_fields_request(const Frames& request, std::string_view op);

// Status replies of a partition that does not exist hold no "status".
using ConsumptionStatus = std::optional<std::vector<std::pair<int64_t, bool>>>;
Frames encode_consumption_status_reply(const ConsumptionStatus& status);
ConsumptionStatus decode_consumption_status_reply(const Frames& reply);
Frames encode_production_status_reply(const std::optional<ProductionStatus>& status);
// The decoder checks the flags against the `fields` the request named.
std::optional<ProductionStatus> decode_production_status_reply(const Frames& reply, size_t fields);

struct ReportTimingRequest {
  std::string task_name;
  std::vector<TimingRecord> records;
};
Frames encode_report_timing_request(const std::string& task_name, std::span<const TimingRecord> records);
ReportTimingRequest decode_report_timing_request(const Frames& request);

Frames encode_task_workload_request(const std::string& task_name);
std::string decode_task_workload_request(const Frames& request);
Frames encode_task_workload_reply(const std::optional<TaskWorkload>& model);
std::optional<TaskWorkload> decode_task_workload_reply(const Frames& reply, const std::string& task_name);

// A request with no keys: partition_list, storage_units.
Frames encode_bare_request();
void decode_bare_request(const Frames& request, std::string_view op);

Frames encode_partition_list_reply(const std::vector<std::string>& partitions);
std::vector<std::string> decode_partition_list_reply(const Frames& reply);

struct KvResolveRequest {
  std::string partition_id;
  std::vector<std::string> keys;
  std::vector<Value> tags;
};
Frames encode_kv_resolve_request(const KvResolveRequest& request);
KvResolveRequest decode_kv_resolve_request(const Frames& request);

struct KvKeysRequest {
  std::string partition_id;
  std::vector<int64_t> global_indexes;
};
Frames encode_kv_keys_request(const KvKeysRequest& request);
KvKeysRequest decode_kv_keys_request(const Frames& request);
// The decoder checks there is one key per global index asked.
Frames encode_kv_keys_reply(const std::vector<std::string>& keys);
std::vector<std::string> decode_kv_keys_reply(const Frames& reply, size_t global_indexes);

// kv_list: the partition (none: every one) and the version of each listing
// the asker holds; the reply is wire_codec.h's kv_list_frame, which the
// decoder takes over (the listings read their keys where it holds them).
struct KvListRequest {
  std::optional<std::string> partition_id;
  std::map<std::string, ListingVersion> known;
};
Frames encode_kv_list_request(const KvListRequest& request);
KvListRequest decode_kv_list_request(const Frames& request);
Frames encode_kv_list_reply(const std::vector<PartitionKeys>& listed);
std::vector<PartitionKeys> decode_kv_list_reply(Frames& reply);

// A checkpoint path: save, load, save_storage.
Frames encode_path_request(const std::string& path);
std::string decode_path_request(const Frames& request, std::string_view op);

struct SaveCheckpointRequest {
  std::string controller;  // the controller's file
  std::string storage;     // the storage units' index
};
Frames encode_save_checkpoint_request(const SaveCheckpointRequest& request);
SaveCheckpointRequest decode_save_checkpoint_request(const Frames& request);

// save_storage's and save_checkpoint's reply: each unit's fingerprint, in
// routing order.
Frames encode_fingerprints_reply(const std::vector<uint64_t>& fingerprints);
std::vector<uint64_t> decode_fingerprints_reply(const Frames& reply, std::string_view op);

// load_storage: fingerprints empty (absent) loads unchecked, else one per
// each of the `storage_units` units; check_only has every unit check its
// file and load nothing.
struct LoadStorageRequest {
  std::string path;
  std::vector<uint64_t> fingerprints;
  bool check_only = false;
};
Frames encode_load_storage_request(const LoadStorageRequest& request);
LoadStorageRequest decode_load_storage_request(const Frames& request, size_t storage_units);

// A unit's registration (its heartbeat). instance, incarnation and
// protocol are absent from units that predate them; the wire's integers are
// signed, so the unsigned ids travel bit-cast.
struct RegisterStorageRequest {
  std::string endpoint;  // never empty
  std::optional<uint64_t> instance;
  std::string admin_token;
  std::optional<uint64_t> incarnation;
  std::optional<int64_t> protocol;
};
Frames encode_register_storage_request(const RegisterStorageRequest& request);
RegisterStorageRequest decode_register_storage_request(const Frames& request);

// The registered units (sorted endpoints) and how many are expected; a
// register_storage reply adds the controller's incarnation.
struct StorageUnitsReply {
  std::vector<std::string> units;
  int64_t expected = 0;
  std::optional<uint64_t> incarnation;  // register_storage's reply only
};
Frames encode_storage_units_reply(const StorageUnitsReply& reply);
StorageUnitsReply decode_storage_units_reply(const Frames& reply, std::string_view op);

// hello's request and reply: {"protocol": the sender's kProtocolVersion}.
Frames encode_hello(int64_t protocol);
int64_t decode_hello(const Frames& message, std::string_view what);
// The error a peer of another protocol version gets: `peer` names it and
// its version (nullopt: it predates versions); `here` is who refuses it.
std::string protocol_mismatch(const std::string& here, const std::string& peer, std::optional<int64_t> version);

// replay_pass: the ReplayRequest (its options and cursor as nested maps),
// and the ReplayPass (replay_protocol.cc).
Frames encode_replay_pass_request(const ReplayRequest& request);
ReplayRequest decode_replay_pass_request(const Frames& request);
Frames encode_replay_pass_reply(const ReplayPass& pass);
ReplayPass decode_replay_pass_reply(const Frames& reply);
// ack_replay_pass: the partition and the pass's id; the ReplayAck back.
struct AckReplayPassRequest {
  std::string partition_id;
  uint64_t pass_id = 0;
};
Frames encode_ack_replay_pass_request(const AckReplayPassRequest& request);
AckReplayPassRequest decode_ack_replay_pass_request(const Frames& request);
Frames encode_ack_replay_pass_reply(const ReplayAck& ack);
ReplayAck decode_ack_replay_pass_reply(const Frames& reply);
// reissue_inflight_prompts: the partition and the resumed step; the
// ReissuedPrompts back (cleared_trajectories: its released indexes' count).
struct ReissueRequest {
  std::string partition_id;
  int64_t global_steps = 0;
  bool member_status = false;  // written only when set (as before member statuses otherwise)
};
Frames encode_reissue_request(const ReissueRequest& request);
ReissueRequest decode_reissue_request(const Frames& request);
Frames encode_reissue_reply(const ReissuedPrompts& reissued);
ReissuedPrompts decode_reissue_reply(const Frames& reply);

// watch: the WatchRequest, and the WatchBatch (watch_protocol.cc). The reply
// decoder refuses more than kMaxWatchChanges changes and unknown kinds.
Frames encode_watch_request(const WatchRequest& request);
WatchRequest decode_watch_request(const Frames& request);
Frames encode_watch_reply(const WatchBatch& batch);
WatchBatch decode_watch_reply(const Frames& reply);

// set_policy_version's request and policy_version's reply: {"version"}
// (policy_version_protocol.cc); the controller checks the value.
Frames encode_policy_version(int64_t version);
int64_t decode_policy_version(const Frames& message, std::string_view what);
// policy_versions: samples named by global index or (kv) by key, exactly one.
struct PolicyVersionsRequest {
  std::string partition_id;
  std::optional<std::vector<int64_t>> global_indexes;
  std::optional<std::vector<std::string>> keys;
};
Frames encode_policy_versions_request(const PolicyVersionsRequest& request);
PolicyVersionsRequest decode_policy_versions_request(const Frames& request);
// The decoder checks there is one start and one finish per sample asked.
Frames encode_policy_versions_reply(const PolicyVersions& versions);
PolicyVersions decode_policy_versions_reply(const Frames& reply, size_t samples);

}  // namespace seqflow::transport::control
