#include "transport/control_protocol.h"

#include "seqflow/error.h"
#include "seqflow/limits.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::control {
namespace {

using wire::binary_of;
using wire::Header;
using wire::header_message;
using wire::Json;

using wire::reply_name;
using wire::request_name;

Json strings(std::span<const std::string> values) { return std::vector<std::string>(values.begin(), values.end()); }

void add_samples(Json& header, const SamplesRequest& request) {
  header["partition_id"] = request.partition_id;
  header["indexes"] = binary_of(std::span<const int64_t>(request.indexes));
  if (!request.generations.empty()) header["generations"] = binary_of(std::span<const uint64_t>(request.generations));
}

SamplesRequest samples_of(const Header& header) {
  return {header.text("partition_id"), header.numbers<int64_t>("indexes"),
          header.has("generations") ? header.numbers<uint64_t>("generations") : std::vector<uint64_t>{}};
}

std::string_view flag_key(std::string_view op) { return op == kForgetPartitionIfEmpty ? "forgotten" : "value"; }

CreatedBatch created_batch_of(const Frames& reply, std::string_view op, bool with_made_keys) {
  const std::string what = reply_name(op);
  if (reply.size() != 2) throw_invalid(what + " holds " + std::to_string(reply.size()) + " frames, not 2");
  const Header header = wire::read_header(reply, 1, what, {"created", "made_keys"});
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
  Json header{{"partition_id", request.partition_id}, {"count", request.count}};
  if (request.budget) header["budget_ms"] = request.budget->count();
  return header_message(header);
}

InsertRequest decode_insert_request(const Frames& request) {
  const Header header = wire::read_header(request, 0, request_name(kInsert), {"partition_id", "count", "budget_ms"});
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
  reply.push_back(wire::header_frame(Json{{"created", created}}));
  return reply;
}

CreatedBatch decode_insert_reply(const Frames& reply) { return created_batch_of(reply, kInsert, false); }

Frames encode_kv_resolve_reply(const BatchMeta& meta, bool created, const std::vector<uint8_t>& made_keys) {
  Frames reply = encode_batch_reply(meta);
  reply.push_back(
      wire::header_frame(Json{{"created", created}, {"made_keys", binary_of(std::span<const uint8_t>(made_keys))}}));
  return reply;
}

CreatedBatch decode_kv_resolve_reply(const Frames& reply) { return created_batch_of(reply, kKvResolve, true); }

Frames encode_get_meta_request(const MetaRequest& request) { return header_message(wire::meta_request_frame(request)); }

MetaRequest decode_get_meta_request(const Frames& request) {
  return wire::read_meta_request(request, 0, request_name(kGetMeta));
}

Frames encode_samples_request(const SamplesRequest& request) {
  Json header;
  add_samples(header, request);
  return header_message(header);
}

SamplesRequest decode_samples_request(const Frames& request, std::string_view op) {
  return samples_of(wire::read_header(request, 0, request_name(op), {"partition_id", "indexes", "generations"}));
}

Frames encode_released_reply(const std::vector<int64_t>& released) {
  return header_message(Json{{"released", binary_of(std::span<const int64_t>(released))}});
}

std::vector<int64_t> decode_released_reply(const Frames& reply, std::string_view op) {
  return wire::read_header(reply, 0, reply_name(op), {"released"}).numbers<int64_t>("released");
}

Frames encode_mark_produced_request(const MarkProducedRequest& request) {
  Json header;
  add_samples(header, request.samples);
  header["fields"] = wire::encode_schemas(request.fields);
  header["custom_meta"] = wire::encode_objects(request.custom_meta);
  if (request.write_version != 0) header["write_version"] = request.write_version;
  return header_message(header);
}

MarkProducedRequest decode_mark_produced_request(const Frames& request) {
  const Header header =
      wire::read_header(request, 0, request_name(kMarkProduced),
                        {"partition_id", "indexes", "generations", "fields", "custom_meta", "write_version"});
  MarkProducedRequest out{samples_of(header), wire::decode_schemas(header.at("fields"), header.what()),
                          header.objects("custom_meta"), 0};
  const int64_t write_version = header.has("write_version") ? header.integer("write_version") : 0;
  if (write_version < 0) header.fail("write_version", "must not be negative");
  out.write_version = static_cast<uint64_t>(write_version);
  return out;
}

Frames encode_mark_produced_reply(const CommittedWrite& committed) {
  return header_message(wire::encode_committed_write(committed));
}

CommittedWrite decode_mark_produced_reply(const Frames& reply, size_t samples) {
  const std::string what = reply_name(kMarkProduced);
  return wire::decode_committed_write(wire::read_header(reply, 0, what), samples, what);
}

Frames encode_set_custom_meta_request(const SetCustomMetaRequest& request) {
  Json header;
  add_samples(header, request.samples);
  header["custom_meta"] = wire::encode_objects(request.custom_meta);
  return header_message(header);
}

SetCustomMetaRequest decode_set_custom_meta_request(const Frames& request) {
  const Header header = wire::read_header(request, 0, request_name(kSetCustomMeta),
                                          {"partition_id", "indexes", "generations", "custom_meta"});
  return {samples_of(header), header.objects("custom_meta")};
}

Frames encode_sample_production_request(const SampleProductionRequest& request) {
  Json header;
  add_samples(header, request.samples);
  header["fields"] = request.fields;
  return header_message(header);
}

SampleProductionRequest decode_sample_production_request(const Frames& request) {
  const Header header = wire::read_header(request, 0, request_name(kSampleProduction),
                                          {"partition_id", "indexes", "generations", "fields"});
  return {samples_of(header), header.texts("fields")};
}

Frames encode_sample_production_reply(const SampleProduction& production) {
  return header_message(Json{{"exists", binary_of(std::span<const uint8_t>(production.exists))},
                             {"generations", binary_of(std::span<const uint64_t>(production.generations))},
                             {"produced", binary_of(std::span<const uint8_t>(production.produced))},
                             {"write_version", production.write_version},
                             {"write_tags", binary_of(std::span<const uint64_t>(production.write_tags))}});
}

SampleProduction decode_sample_production_reply(const Frames& reply, size_t samples, size_t fields) {
  const Header header = wire::read_header(reply, 0, reply_name(kSampleProduction),
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
  return header_message(Json{{"partition_id", partition_id}});
}

std::string decode_partition_request(const Frames& request, std::string_view op) {
  return wire::read_header(request, 0, request_name(op), {"partition_id"}).text("partition_id");
}

Frames encode_flag_reply(std::string_view op, bool flag) { return header_message(Json{{flag_key(op), flag}}); }

bool decode_flag_reply(const Frames& reply, std::string_view op) {
  return wire::read_header(reply, 0, reply_name(op), {flag_key(op)}).boolean(flag_key(op));
}

Frames encode_keys_request(const KeysRequest& request) {
  return header_message(Json{{"partition_id", request.partition_id}, {"keys", strings(request.keys)}});
}

KeysRequest decode_keys_request(const Frames& request, std::string_view op) {
  const Header header = wire::read_header(request, 0, request_name(op), {"partition_id", "keys"});
  return {header.text("partition_id"), header.texts("keys")};
}

Frames encode_reset_consumption_request(const ResetConsumptionRequest& request) {
  Json header{{"partition_id", request.partition_id}};
  if (request.task_name) header["task_name"] = *request.task_name;
  return header_message(header);
}

ResetConsumptionRequest decode_reset_consumption_request(const Frames& request) {
  const Header header = wire::read_header(request, 0, request_name(kResetConsumption), {"partition_id", "task_name"});
  return {header.text("partition_id"),
          header.has("task_name") ? std::optional(header.text("task_name")) : std::nullopt};
}

Frames encode_task_request(const TaskRequest& request) {
  return header_message(Json{{"task_name", request.task_name}, {"partition_id", request.partition_id}});
}

TaskRequest decode_task_request(const Frames& request, std::string_view op) {
  const Header header = wire::read_header(request, 0, request_name(op), {"task_name", "partition_id"});
  return {header.text("task_name"), header.text("partition_id")};
}

Frames encode_fields_request(const FieldsRequest& request) {
  return header_message(Json{{"fields", strings(request.fields)}, {"partition_id", request.partition_id}});
}

FieldsRequest decode_fields_request(const Frames& request, std::string_view op) {
  const Header header = wire::read_header(request, 0, request_name(op), {"fields", "partition_id"});
  return {header.texts("fields"), header.text("partition_id")};
}

Frames encode_consumption_status_reply(const ConsumptionStatus& status) {
  return header_message(status ? Json{{"status", wire::encode_status(*status)}} : Json::object());
}

ConsumptionStatus decode_consumption_status_reply(const Frames& reply) {
  const Header header = wire::read_header(reply, 0, reply_name(kConsumptionStatus), {"status"});
  if (!header.has("status")) return std::nullopt;
  return wire::decode_status(header.at("status"), header.what());
}

Frames encode_production_status_reply(const std::optional<ProductionStatus>& status) {
  if (!status) return header_message(Json::object());
  return header_message(Json{{"status",
                              {{"indexes", binary_of(std::span<const int64_t>(status->global_indexes))},
                               {"produced", binary_of(std::span<const uint8_t>(status->produced))}}}});
}

std::optional<ProductionStatus> decode_production_status_reply(const Frames& reply, size_t fields) {
  const Header header = wire::read_header(reply, 0, reply_name(kProductionStatus), {"status"});
  if (!header.has("status")) return std::nullopt;
  const Header status(header.at("status"), header.what() + "'s status", {"indexes", "produced"});
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
  return header_message(Json{{"partitions", partitions}});
}

std::vector<std::string> decode_partition_list_reply(const Frames& reply) {
  return wire::read_header(reply, 0, reply_name(kPartitionList), {"partitions"}).texts("partitions");
}

Frames encode_kv_resolve_request(const KvResolveRequest& request) {
  return header_message(Json{{"partition_id", request.partition_id},
                             {"keys", strings(request.keys)},
                             {"tags", wire::encode_objects(request.tags)}});
}

KvResolveRequest decode_kv_resolve_request(const Frames& request) {
  const Header header = wire::read_header(request, 0, request_name(kKvResolve), {"partition_id", "keys", "tags"});
  return {header.text("partition_id"), header.texts("keys"), header.objects("tags")};
}

Frames encode_kv_keys_request(const KvKeysRequest& request) {
  return header_message(Json{{"partition_id", request.partition_id},
                             {"global_indexes", binary_of(std::span<const int64_t>(request.global_indexes))}});
}

KvKeysRequest decode_kv_keys_request(const Frames& request) {
  const Header header = wire::read_header(request, 0, request_name(kKvKeys), {"partition_id", "global_indexes"});
  return {header.text("partition_id"), header.numbers<int64_t>("global_indexes")};
}

Frames encode_kv_keys_reply(const std::vector<std::string>& keys) { return header_message(Json{{"keys", keys}}); }

std::vector<std::string> decode_kv_keys_reply(const Frames& reply, size_t global_indexes) {
  const Header header = wire::read_header(reply, 0, reply_name(kKvKeys), {"keys"});
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
  const Header header =
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
