#include "transport/control_protocol.h"

#include "seqflow/error.h"
#include "seqflow/limits.h"
#include "transport/schema_codec.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::control {
namespace {

using wire::header_message;

using wire::reply_name;
using wire::request_name;

void add_samples(MsgpackMapWriter& header, const SamplesRequest& request) {
  header.set("partition_id").string(request.partition_id);
  header.set("indexes").numbers(std::span<const int64_t>(request.indexes));
  if (!request.generations.empty()) header.set("generations").numbers(std::span<const uint64_t>(request.generations));
}

SamplesRequest samples_of(const EncodedMap& header) {
  return {header.text("partition_id"), header.numbers<int64_t>("indexes"),
          header.has("generations") ? header.numbers<uint64_t>("generations") : std::vector<uint64_t>{}};
}

std::string_view flag_key(std::string_view op) { return op == kForgetPartitionIfEmpty ? "forgotten" : "value"; }

CreatedBatch created_batch_of(const Frames& reply, std::string_view op, bool with_made_keys) {
  const std::string what = reply_name(op);
  if (reply.size() != 2) throw_invalid(what + " holds " + std::to_string(reply.size()) + " frames, not 2");
  const EncodedMap header = wire::read_header(reply, 1, what, {"created", "made_keys"});
  CreatedBatch out{wire::read_batch_meta(reply, 0, what), header.boolean("created"), {}};
  if (with_made_keys) {
    out.made_keys = header.numbers<uint8_t>("made_keys");
    if (out.made_keys.size() != out.meta.size()) header.fail("made_keys", "must hold one flag per key");
  }
  return out;
}

}  // namespace

Frames encode_empty_reply() { return wire::empty_message(); }

void decode_empty_reply(const Frames& reply, std::string_view op) { wire::read_empty_message(reply, reply_name(op)); }

Frames encode_batch_reply(const BatchMeta& meta) { return header_message(wire::batch_meta_frame(meta)); }

BatchMeta decode_batch_reply(const Frames& reply, std::string_view op) {
  return wire::read_batch_meta(reply, 0, reply_name(op));
}

Frames encode_insert_request(const InsertRequest& request) {
  MsgpackMapWriter header;
  header.set("partition_id").string(request.partition_id);
  header.set("count").integer(request.count);
  if (request.budget) header.set("budget_ms").integer(request.budget->count());
  return header_message(header);
}

InsertRequest decode_insert_request(const Frames& request) {
  const EncodedMap header =
      wire::read_header(request, 0, request_name(kInsert), {"partition_id", "count", "budget_ms"});
  InsertRequest out{header.text("partition_id"), header.integer("count"), std::nullopt};
  if (header.has("budget_ms")) {
    const int64_t budget = header.integer("budget_ms");
    if (budget < 1 || budget > kMaxInsertBudget.count()) {
      header.fail("budget_ms", "must be between 1 and " + std::to_string(kMaxInsertBudget.count()) + " ms, got " +
                                   std::to_string(budget));
    }
    out.budget = std::chrono::milliseconds(budget);
  }
  return out;
}

Frames encode_insert_reply(const BatchMeta& meta, bool created) {
  Frames reply = encode_batch_reply(meta);
  MsgpackMapWriter header;
  header.set("created").boolean(created);
  reply.push_back(wire::header_frame(header));
  return reply;
}

CreatedBatch decode_insert_reply(const Frames& reply) { return created_batch_of(reply, kInsert, false); }

Frames encode_kv_resolve_reply(const BatchMeta& meta, bool created, const std::vector<uint8_t>& made_keys) {
  Frames reply = encode_batch_reply(meta);
  MsgpackMapWriter header;
  header.set("created").boolean(created);
  header.set("made_keys").numbers(std::span<const uint8_t>(made_keys));
  reply.push_back(wire::header_frame(header));
  return reply;
}

CreatedBatch decode_kv_resolve_reply(const Frames& reply) { return created_batch_of(reply, kKvResolve, true); }

Frames encode_get_meta_request(const MetaRequest& request) { return header_message(wire::meta_request_frame(request)); }

MetaRequest decode_get_meta_request(const Frames& request) {
  return wire::read_meta_request(request, 0, request_name(kGetMeta));
}

Frames encode_samples_request(const SamplesRequest& request) {
  MsgpackMapWriter header;
  add_samples(header, request);
  return header_message(header);
}

SamplesRequest decode_samples_request(const Frames& request, std::string_view op) {
  return samples_of(wire::read_header(request, 0, request_name(op), {"partition_id", "indexes", "generations"}));
}

Frames encode_released_reply(const std::vector<int64_t>& released) {
  MsgpackMapWriter header;
  header.set("released").numbers(std::span<const int64_t>(released));
  return header_message(header);
}

std::vector<int64_t> decode_released_reply(const Frames& reply, std::string_view op) {
  return wire::read_header(reply, 0, reply_name(op), {"released"}).numbers<int64_t>("released");
}

Frames encode_mark_produced_request(const MarkProducedRequest& request) {
  MsgpackMapWriter header;
  add_samples(header, request.samples);
  wire::write_schemas(header.set("fields"), request.fields, wire::SchemaKeys::kSorted);
  wire::write_objects(header.set("custom_meta"), request.custom_meta);
  if (request.write_version != 0) header.set("write_version").unsigned_integer(request.write_version);
  return header_message(header);
}

MarkProducedRequest decode_mark_produced_request(const Frames& request) {
  const EncodedMap header =
      wire::read_header(request, 0, request_name(kMarkProduced),
                        {"partition_id", "indexes", "generations", "fields", "custom_meta", "write_version"});
  MarkProducedRequest out{samples_of(header),
                          wire::read_schemas(header.value("fields"), header.depth() + 1, header.what()),
                          header.objects("custom_meta"), 0};
  const int64_t write_version = header.has("write_version") ? header.integer("write_version") : 0;
  if (write_version < 0) header.fail("write_version", "must not be negative");
  out.write_version = static_cast<uint64_t>(write_version);
  return out;
}

Frames encode_mark_produced_reply(const CommittedWrite& committed) {
  return header_message(wire::committed_write_header(committed));
}

CommittedWrite decode_mark_produced_reply(const Frames& reply, size_t samples) {
  return wire::read_committed_write(
      wire::read_header(reply, 0, reply_name(kMarkProduced), {"versions", "newer_meta_positions", "newer_metas"}),
      samples);
}

Frames encode_set_custom_meta_request(const SetCustomMetaRequest& request) {
  MsgpackMapWriter header;
  add_samples(header, request.samples);
  wire::write_objects(header.set("custom_meta"), request.custom_meta);
  return header_message(header);
}

SetCustomMetaRequest decode_set_custom_meta_request(const Frames& request) {
  const EncodedMap header = wire::read_header(request, 0, request_name(kSetCustomMeta),
                                              {"partition_id", "indexes", "generations", "custom_meta"});
  return {samples_of(header), header.objects("custom_meta")};
}

Frames encode_sample_production_request(const SampleProductionRequest& request) {
  MsgpackMapWriter header;
  add_samples(header, request.samples);
  header.set("fields").strings(request.fields);
  return header_message(header);
}

SampleProductionRequest decode_sample_production_request(const Frames& request) {
  const EncodedMap header = wire::read_header(request, 0, request_name(kSampleProduction),
                                              {"partition_id", "indexes", "generations", "fields"});
  return {samples_of(header), header.texts("fields")};
}

Frames encode_sample_production_reply(const SampleProduction& production) {
  MsgpackMapWriter header;
  header.set("exists").numbers(std::span<const uint8_t>(production.exists));
  header.set("generations").numbers(std::span<const uint64_t>(production.generations));
  header.set("produced").numbers(std::span<const uint8_t>(production.produced));
  header.set("write_version").unsigned_integer(production.write_version);
  header.set("write_tags").numbers(std::span<const uint64_t>(production.write_tags));
  return header_message(header);
}

SampleProduction decode_sample_production_reply(const Frames& reply, size_t samples, size_t fields) {
  const EncodedMap header = wire::read_header(reply, 0, reply_name(kSampleProduction),
                                              {"exists", "generations", "produced", "write_version", "write_tags"});
  SampleProduction out;
  const int64_t write_version = header.integer("write_version");
  if (write_version <= 0) header.fail("write_version", "must be a positive integer");
  out.write_version = static_cast<uint64_t>(write_version);
  if (header.has("write_tags")) out.write_tags = header.numbers<uint64_t>("write_tags");
  out.field_count = fields;
  out.exists = header.numbers<uint8_t>("exists");
  out.generations = header.numbers<uint64_t>("generations");
  out.produced = header.numbers<uint8_t>("produced");
  if (out.exists.size() != samples) header.fail("exists", "must hold one flag per sample");
  if (out.generations.size() != samples) header.fail("generations", "must hold one generation per sample");
  if (out.produced.size() != samples * fields) {
    header.fail("produced", "must hold one flag per sample and field");
  }
  return out;
}

Frames encode_partition_request(const std::string& partition_id) {
  MsgpackMapWriter header;
  header.set("partition_id").string(partition_id);
  return header_message(header);
}

std::string decode_partition_request(const Frames& request, std::string_view op) {
  return wire::read_header(request, 0, request_name(op), {"partition_id"}).text("partition_id");
}

Frames encode_flag_reply(std::string_view op, bool flag) {
  MsgpackMapWriter header;
  header.set(flag_key(op)).boolean(flag);
  return header_message(header);
}

bool decode_flag_reply(const Frames& reply, std::string_view op) {
  return wire::read_header(reply, 0, reply_name(op), {flag_key(op)}).boolean(flag_key(op));
}

Frames encode_keys_request(const KeysRequest& request) {
  MsgpackMapWriter header;
  header.set("partition_id").string(request.partition_id);
  header.set("keys").strings(request.keys);
  return header_message(header);
}

KeysRequest decode_keys_request(const Frames& request, std::string_view op) {
  const EncodedMap header = wire::read_header(request, 0, request_name(op), {"partition_id", "keys"});
  return {header.text("partition_id"), header.texts("keys")};
}

Frames encode_reset_consumption_request(const ResetConsumptionRequest& request) {
  MsgpackMapWriter header;
  header.set("partition_id").string(request.partition_id);
  if (request.task_name) header.set("task_name").string(*request.task_name);
  return header_message(header);
}

ResetConsumptionRequest decode_reset_consumption_request(const Frames& request) {
  const EncodedMap header =
      wire::read_header(request, 0, request_name(kResetConsumption), {"partition_id", "task_name"});
  return {header.text("partition_id"),
          header.has("task_name") ? std::optional(header.text("task_name")) : std::nullopt};
}

Frames encode_end_leases_request(const EndLeasesRequest& request) {
  MsgpackMapWriter header;
  add_samples(header, request.samples);
  header.set("task_name").string(request.task_name);
  header.set("release").boolean(request.release);
  if (request.lease != 0) header.set("lease").unsigned_integer(request.lease);
  return header_message(header);
}

EndLeasesRequest decode_end_leases_request(const Frames& request) {
  const EncodedMap header =
      wire::read_header(request, 0, request_name(kEndLeases),
                        {"partition_id", "indexes", "generations", "task_name", "release", "lease"});
  EndLeasesRequest out{samples_of(header), header.text("task_name"), header.boolean("release"), 0};
  if (header.has("lease")) {
    const int64_t lease = header.integer("lease");
    if (lease <= 0) header.fail("lease", "must be positive");
    out.lease = static_cast<uint64_t>(lease);
  }
  return out;
}

Frames encode_end_leases_reply(size_t ended) {
  MsgpackMapWriter header;
  header.set("ended").integer(static_cast<int64_t>(ended));
  return header_message(header);
}

size_t decode_end_leases_reply(const Frames& reply) {
  const EncodedMap header = wire::read_header(reply, 0, reply_name(kEndLeases), {"ended"});
  const int64_t ended = header.integer("ended");
  if (ended < 0) header.fail("ended", "must not be negative");
  return static_cast<size_t>(ended);
}

Frames encode_task_request(const TaskRequest& request) {
  MsgpackMapWriter header;
  header.set("task_name").string(request.task_name);
  header.set("partition_id").string(request.partition_id);
  return header_message(header);
}

TaskRequest decode_task_request(const Frames& request, std::string_view op) {
  const EncodedMap header = wire::read_header(request, 0, request_name(op), {"task_name", "partition_id"});
  return {header.text("task_name"), header.text("partition_id")};
}

Frames encode_fields_request(const FieldsRequest& request) {
  MsgpackMapWriter header;
  header.set("fields").strings(request.fields);
  header.set("partition_id").string(request.partition_id);
  return header_message(header);
}

FieldsRequest decode_fields_request(const Frames& request, std::string_view op) {
  const EncodedMap header = wire::read_header(request, 0, request_name(op), {"fields", "partition_id"});
  return {header.texts("fields"), header.text("partition_id")};
}

Frames encode_consumption_status_reply(const ConsumptionStatus& status) {
  MsgpackMapWriter header;
  if (status) wire::write_status(header.set("status"), *status);
  return header_message(header);
}

ConsumptionStatus decode_consumption_status_reply(const Frames& reply) {
  const EncodedMap header = wire::read_header(reply, 0, reply_name(kConsumptionStatus), {"status"});
  if (!header.has("status")) return std::nullopt;
  return wire::read_status(header.map("status", header.what(), {"indexes", "flags"}));
}

Frames encode_production_status_reply(const std::optional<ProductionStatus>& status) {
  MsgpackMapWriter header;
  if (status) {
    MsgpackMapWriter entry;
    entry.set("indexes").numbers(std::span<const int64_t>(status->global_indexes));
    entry.set("produced").numbers(std::span<const uint8_t>(status->produced));
    entry.write(header.set("status"));
  }
  return header_message(header);
}

std::optional<ProductionStatus> decode_production_status_reply(const Frames& reply, size_t fields) {
  const EncodedMap header = wire::read_header(reply, 0, reply_name(kProductionStatus), {"status"});
  if (!header.has("status")) return std::nullopt;
  const EncodedMap status = header.map("status", header.what() + "'s status", {"indexes", "produced"});
  ProductionStatus out;
  out.field_count = fields;
  out.global_indexes = status.numbers<int64_t>("indexes");
  out.produced = status.numbers<uint8_t>("produced");
  if (out.produced.size() != out.global_indexes.size() * fields) {
    status.fail("produced", "must hold one flag per sample and field");
  }
  return out;
}

Frames encode_bare_request() { return wire::empty_message(); }

void decode_bare_request(const Frames& request, std::string_view op) {
  wire::read_empty_message(request, request_name(op));
}

Frames encode_partition_list_reply(const std::vector<std::string>& partitions) {
  MsgpackMapWriter header;
  header.set("partitions").strings(partitions);
  return header_message(header);
}

std::vector<std::string> decode_partition_list_reply(const Frames& reply) {
  return wire::read_header(reply, 0, reply_name(kPartitionList), {"partitions"}).texts("partitions");
}

Frames encode_kv_resolve_request(const KvResolveRequest& request) {
  MsgpackMapWriter header;
  header.set("partition_id").string(request.partition_id);
  header.set("keys").strings(request.keys);
  wire::write_objects(header.set("tags"), request.tags);
  return header_message(header);
}

KvResolveRequest decode_kv_resolve_request(const Frames& request) {
  const EncodedMap header = wire::read_header(request, 0, request_name(kKvResolve), {"partition_id", "keys", "tags"});
  return {header.text("partition_id"), header.texts("keys"), header.objects("tags")};
}

Frames encode_kv_keys_request(const KvKeysRequest& request) {
  MsgpackMapWriter header;
  header.set("partition_id").string(request.partition_id);
  header.set("global_indexes").numbers(std::span<const int64_t>(request.global_indexes));
  return header_message(header);
}

KvKeysRequest decode_kv_keys_request(const Frames& request) {
  const EncodedMap header = wire::read_header(request, 0, request_name(kKvKeys), {"partition_id", "global_indexes"});
  return {header.text("partition_id"), header.numbers<int64_t>("global_indexes")};
}

Frames encode_kv_keys_reply(const std::vector<std::string>& keys) {
  MsgpackMapWriter header;
  header.set("keys").strings(keys);
  return header_message(header);
}

std::vector<std::string> decode_kv_keys_reply(const Frames& reply, size_t global_indexes) {
  const EncodedMap header = wire::read_header(reply, 0, reply_name(kKvKeys), {"keys"});
  auto keys = header.texts("keys");
  if (keys.size() != global_indexes) {
    throw_invalid(header.what() + " holds " + std::to_string(keys.size()) + " keys for " +
                  std::to_string(global_indexes) + " global indexes");
  }
  return keys;
}

Frames encode_kv_list_request(const KvListRequest& request) {
  return header_message(wire::kv_list_request(request.partition_id ? &*request.partition_id : nullptr, request.known));
}

KvListRequest decode_kv_list_request(const Frames& request) {
  const EncodedMap header =
      wire::read_header(request, 0, request_name(kKvList), {"partition_id", "known_partitions", "known_versions"});
  return {header.has("partition_id") ? std::optional(header.text("partition_id")) : std::nullopt,
          wire::read_known_listings(header)};
}

Frames encode_kv_list_reply(const std::vector<PartitionKeys>& listed) {
  return header_message(wire::kv_list_frame(listed));
}

std::vector<PartitionKeys> decode_kv_list_reply(Frames& reply) {
  return wire::read_kv_list(reply, 0, reply_name(kKvList));
}

}  // namespace seqflow::transport::control
