#include "client/remote_control_plane.h"

#include <thread>

#include "client/call_deadline.h"
#include "common/value_json.h"
#include "core/custom_meta.h"
#include "seqflow/limits.h"
#include "transport/timing_codec.h"
#include "transport/wire_codec.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

using transport::wire::Header;
using transport::wire::Json;

Json binary_indexes(std::span<const int64_t> indexes) { return transport::wire::binary_of(indexes); }

// The request naming samples, with their generations when known.
Json samples_request(const std::string& partition_id, std::span<const int64_t> indexes,
                     std::span<const uint64_t> generations) {
  Json request{{"partition_id", partition_id}, {"indexes", binary_indexes(indexes)}};
  if (!generations.empty()) request["generations"] = transport::wire::binary_of(generations);
  return request;
}

std::vector<int64_t> released_of(const Json& reply, std::string_view op) {
  return Header(reply, std::string(op) + " reply", {"released"}).numbers<int64_t>("released");
}

// A blocking fetch may wait `request.timeout` at the controller: the call
// itself gets that long plus the usual round-trip allowance.
constexpr std::chrono::milliseconds kMaxCallTimeout = std::chrono::hours(24 * 365);

// One request on a pooled connection, and the frames of its reply.
transport::Frames exchange(transport::ConnectionPool& controller, std::string_view op, transport::Frames request,
                           transport::Connection::Clock::time_point deadline) {
  CallDeadline::check_open(deadline, op, controller.endpoint());
  auto lease = controller.acquire();
  const uint64_t id = lease->send(op, std::move(request), deadline);
  return lease->receive(id, deadline);
}

// A reply that is a BatchMeta, read from its frame without a JSON tree.
BatchMeta batch_meta_reply(transport::ConnectionPool& controller, std::string_view op, transport::Frames request,
                           transport::Connection::Clock::time_point deadline) {
  return transport::wire::read_batch_meta(exchange(controller, op, std::move(request), deadline), 0,
                                          std::string(op) + " reply");
}

// A reply [the batch, {"created": bool}]: a call that may create its partition.
// made_keys: a kv_resolve's flag per key (its reply's "made_keys").
BatchMeta batch_meta_with_created(const transport::Frames& reply, const std::string& what, bool* created,
                                  std::vector<uint8_t>* made_keys = nullptr) {
  if (reply.size() != 2) throw_invalid(what + " holds " + std::to_string(reply.size()) + " frames, not 2");
  const Json json = transport::wire::read_header(reply, 1, what);
  const Header header(json, what, {"created", "made_keys"});
  const bool made = header.boolean("created");
  if (created) *created = made;
  BatchMeta meta = transport::wire::read_batch_meta(reply, 0, what);
  if (made_keys) {
    *made_keys = header.numbers<uint8_t>("made_keys");
    if (made_keys->size() != meta.size()) header.fail("made_keys", "must hold one flag per key");
  }
  return meta;
}

}  // namespace

RemoteControlPlane::RemoteControlPlane(std::shared_ptr<transport::ConnectionPool> controller,
                                       std::chrono::milliseconds timeout)
    : controller_(std::move(controller)), timeout_(timeout) {}

Json RemoteControlPlane::call(std::string_view op, const Json& header) const {
  return call(op, header, CallDeadline::of_request(timeout_));
}

Json RemoteControlPlane::call(std::string_view op, const Json& header, Clock::time_point deadline) const {
  return transport::wire::read_header(exchange(*controller_, op, transport::wire::header_message(header), deadline), 0,
                                      std::string(op) + " reply");
}

BatchMeta RemoteControlPlane::insert(const std::string& partition_id, int64_t count, bool* created) {
  const auto deadline = CallDeadline::of_request(timeout_);
  // The controller refuses the insert once this budget is spent, so a client
  // that gave up leaves no samples behind. Relative: clocks differ between
  // machines. Rounded down: the controller must not outlast this client.
  const auto budget =
      std::min(std::chrono::floor<std::chrono::milliseconds>(deadline - Clock::now()), kMaxInsertBudget);
  if (budget.count() < 1) CallDeadline::throw_passed("insert", controller_->endpoint());
  const Json header{{"partition_id", partition_id}, {"count", count}, {"budget_ms", budget.count()}};
  return batch_meta_with_created(exchange(*controller_, "insert", transport::wire::header_message(header), deadline),
                                 "insert reply", created);
}

CommittedWrite RemoteControlPlane::mark_produced(const std::string& partition_id,
                                                 std::span<const int64_t> global_indexes,
                                                 std::span<const uint64_t> generations,
                                                 const std::map<std::string, FieldSchema>& fields,
                                                 std::span<const Value> custom_meta, uint64_t write_version) {
  core::check_meta_depths(global_indexes, custom_meta);
  Json request = samples_request(partition_id, global_indexes, generations);
  request["fields"] = transport::wire::encode_schemas(fields);
  request["custom_meta"] = transport::wire::encode_objects(custom_meta);
  if (write_version != 0) request["write_version"] = write_version;
  return transport::wire::decode_committed_write(call("mark_produced", request), global_indexes.size(),
                                                 "mark_produced reply");
}

BatchMeta RemoteControlPlane::get_meta(const MetaRequest& request) {
  const bool waits = request.mode == MetaMode::kFetch && !request.polling;
  const auto timeout = waits ? std::min(kMaxCallTimeout, request.timeout + timeout_) : timeout_;
  return batch_meta_reply(*controller_, "get_meta",
                          transport::wire::header_message(transport::wire::meta_request_frame(request)),
                          CallDeadline::of_request(timeout));
}

void RemoteControlPlane::set_custom_meta(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                         std::span<const uint64_t> generations, std::span<const Value> custom_meta) {
  core::check_meta_depths(global_indexes, custom_meta);
  Json request = samples_request(partition_id, global_indexes, generations);
  request["custom_meta"] = transport::wire::encode_objects(custom_meta);
  call("set_custom_meta", request);
}

std::vector<int64_t> RemoteControlPlane::clear_samples(const std::string& partition_id,
                                                       std::span<const int64_t> global_indexes,
                                                       std::span<const uint64_t> generations) {
  return released_of(call("clear_samples", samples_request(partition_id, global_indexes, generations)),
                     "clear_samples");
}

std::vector<int64_t> RemoteControlPlane::reclaim_unproduced(const std::string& partition_id,
                                                            std::span<const int64_t> global_indexes,
                                                            std::span<const uint64_t> generations) {
  return released_of(call("reclaim_unproduced", samples_request(partition_id, global_indexes, generations)),
                     "reclaim_unproduced");
}

std::vector<int64_t> RemoteControlPlane::clear_partition(const std::string& partition_id) {
  return released_of(call("clear_partition", Json{{"partition_id", partition_id}}), "clear_partition");
}

bool RemoteControlPlane::forget_partition_if_empty(const std::string& partition_id) {
  const Json reply = call("forget_partition_if_empty", Json{{"partition_id", partition_id}});
  return Header(reply, "forget_partition_if_empty reply", {"forgotten"}).boolean("forgotten");
}

void RemoteControlPlane::reset_consumption(const std::string& partition_id, const std::string* task_name) {
  Json header{{"partition_id", partition_id}};
  if (task_name != nullptr) header["task_name"] = *task_name;
  call("reset_consumption", header);
}

std::optional<std::vector<std::pair<int64_t, bool>>> RemoteControlPlane::consumption_status(
    const std::string& task_name, const std::string& partition_id) const {
  const Json reply = call("consumption_status", Json{{"task_name", task_name}, {"partition_id", partition_id}});
  const Header header(reply, "consumption_status reply", {"status"});
  if (!header.has("status")) return std::nullopt;
  return transport::wire::decode_status(header.at("status"), "consumption_status reply");
}

std::optional<ProductionStatus> RemoteControlPlane::production_status(std::span<const std::string> fields,
                                                                      const std::string& partition_id) const {
  const Json reply = call("production_status", Json{{"fields", std::vector<std::string>(fields.begin(), fields.end())},
                                                    {"partition_id", partition_id}});
  const Header header(reply, "production_status reply", {"status"});
  if (!header.has("status")) return std::nullopt;
  const Header status(header.at("status"), "production_status reply's status", {"indexes", "produced"});
  ProductionStatus out;
  out.field_count = fields.size();
  out.global_indexes = status.numbers<int64_t>("indexes");
  out.produced = status.numbers<uint8_t>("produced");
  if (out.produced.size() != out.global_indexes.size() * fields.size()) {
    status.fail("produced", "must hold one flag per sample and field");
  }
  return out;
}

SampleProduction RemoteControlPlane::sample_production(const std::string& partition_id,
                                                       std::span<const int64_t> global_indexes,
                                                       std::span<const uint64_t> generations,
                                                       std::span<const std::string> fields) {
  Json request = samples_request(partition_id, global_indexes, generations);
  request["fields"] = std::vector<std::string>(fields.begin(), fields.end());
  const Json reply = call("sample_production", request);
  const Header header(reply, "sample_production reply",
                      {"exists", "generations", "produced", "write_version", "write_tags"});
  SampleProduction out;
  const int64_t write_version = header.integer("write_version");
  if (write_version <= 0) header.fail("write_version", "must be a positive integer");
  out.write_version = static_cast<uint64_t>(write_version);
  if (header.has("write_tags")) out.write_tags = header.numbers<uint64_t>("write_tags");
  out.field_count = fields.size();
  out.exists = header.numbers<uint8_t>("exists");
  out.generations = header.numbers<uint64_t>("generations");
  out.produced = header.numbers<uint8_t>("produced");
  if (out.exists.size() != global_indexes.size()) header.fail("exists", "must hold one flag per sample");
  if (out.generations.size() != global_indexes.size()) {
    header.fail("generations", "must hold one generation per sample");
  }
  if (out.produced.size() != global_indexes.size() * fields.size()) {
    header.fail("produced", "must hold one flag per sample and field");
  }
  return out;
}

bool RemoteControlPlane::all_consumed(const std::string& task_name, const std::string& partition_id) const {
  const Json reply = call("all_consumed", Json{{"task_name", task_name}, {"partition_id", partition_id}});
  return Header(reply, "all_consumed reply", {"value"}).boolean("value");
}

bool RemoteControlPlane::all_produced(std::span<const std::string> fields, const std::string& partition_id) const {
  const Json reply = call("all_produced", Json{{"fields", std::vector<std::string>(fields.begin(), fields.end())},
                                               {"partition_id", partition_id}});
  return Header(reply, "all_produced reply", {"value"}).boolean("value");
}

void RemoteControlPlane::report_timing(const std::string& task_name, std::span<const TimingRecord> records) {
  call("report_timing", transport::wire::timing_request(task_name, records));
}

std::optional<TaskWorkload> RemoteControlPlane::task_workload(const std::string& task_name) const {
  return transport::wire::read_task_workload(call("task_workload", Json{{"task_name", task_name}}), task_name);
}

std::vector<std::string> RemoteControlPlane::partition_list() const {
  const Json reply = call("partition_list", Json::object());
  return Header(reply, "partition_list reply", {"partitions"}).texts("partitions");
}

BatchMeta RemoteControlPlane::kv_resolve(const std::string& partition_id, std::span<const std::string> keys,
                                         std::span<const Value> tags, bool* created, std::vector<uint8_t>* made_keys) {
  core::check_tag_depths(keys, tags);
  const Json header{{"partition_id", partition_id},
                    {"keys", std::vector<std::string>(keys.begin(), keys.end())},
                    {"tags", transport::wire::encode_objects(tags)}};
  return batch_meta_with_created(
      exchange(*controller_, "kv_resolve", transport::wire::header_message(header), CallDeadline::of_request(timeout_)),
      "kv_resolve reply", created, made_keys);
}

BatchMeta RemoteControlPlane::kv_lookup(const std::string& partition_id, std::span<const std::string> keys) const {
  const Json header{{"partition_id", partition_id}, {"keys", std::vector<std::string>(keys.begin(), keys.end())}};
  return batch_meta_reply(*controller_, "kv_lookup", transport::wire::header_message(header),
                          CallDeadline::of_request(timeout_));
}

BatchMeta RemoteControlPlane::kv_find(const std::string& partition_id, std::span<const std::string> keys) const {
  const Json header{{"partition_id", partition_id}, {"keys", std::vector<std::string>(keys.begin(), keys.end())}};
  return batch_meta_reply(*controller_, "kv_find", transport::wire::header_message(header),
                          CallDeadline::of_request(timeout_));
}

std::vector<std::string> RemoteControlPlane::kv_keys(const std::string& partition_id,
                                                     std::span<const int64_t> global_indexes) const {
  const Json reply =
      call("kv_keys", Json{{"partition_id", partition_id}, {"global_indexes", binary_indexes(global_indexes)}});
  auto keys = Header(reply, "kv_keys reply", {"keys"}).texts("keys");
  if (keys.size() != global_indexes.size()) {
    throw_invalid("kv_keys reply holds " + std::to_string(keys.size()) + " keys for " +
                  std::to_string(global_indexes.size()) + " global indexes");
  }
  return keys;
}

std::vector<PartitionKeys> RemoteControlPlane::kv_list(const std::string* partition_id) const {
  std::lock_guard lock(listings_mutex_);
  std::map<std::string, ListingVersion> known;
  for (const auto& [name, listing] : listings_) {
    if (partition_id == nullptr || name == *partition_id) known[name] = listing.version();
  }
  transport::Frames reply = exchange(
      *controller_, "kv_list", transport::wire::header_message(transport::wire::kv_list_request(partition_id, known)),
      CallDeadline::of_request(timeout_));
  std::vector<PartitionKeys> listed = transport::wire::read_kv_list(reply, 0, "kv_list reply");
  std::map<std::string, PartitionKeys> held;  // what the answer leaves this client holding
  for (PartitionKeys& partition : listed) {
    if (partition.is_unchanged()) {
      auto it = listings_.find(partition.partition_id());
      if (it == listings_.end() || it->second.version() != partition.version()) {
        throw Error(ErrorCode::kInternal, "kv_list reply: partition '" + partition.partition_id() +
                                              "' is answered unchanged, but this client holds no such listing");
      }
      partition = it->second;
    }
    held.insert_or_assign(partition.partition_id(), partition);
  }
  // Partitions not listed any more (cleared) are dropped.
  if (partition_id == nullptr) {
    listings_ = std::move(held);
  } else {
    listings_.erase(*partition_id);
    listings_.merge(held);
  }
  return listed;
}

std::vector<int64_t> RemoteControlPlane::kv_clear(const std::string& partition_id, std::span<const std::string> keys) {
  return released_of(call("kv_clear", Json{{"partition_id", partition_id},
                                           {"keys", std::vector<std::string>(keys.begin(), keys.end())}}),
                     "kv_clear");
}

void RemoteControlPlane::save(const std::string& path) const { call("save", Json{{"path", path}}); }

void RemoteControlPlane::load(const std::string& path) { call("load", Json{{"path", path}}); }

std::vector<std::string> RemoteControlPlane::storage_units() const {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    const Json reply = call("storage_units", Json::object());
    const Header fields(reply, "storage_units reply", {"units", "expected"});
    auto units = fields.texts("units");
    const int64_t expected = fields.integer("expected");
    if (expected > 0 && units.size() == static_cast<size_t>(expected)) return units;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error(ErrorCode::kTimeout, std::to_string(units.size()) + " of " + std::to_string(expected) +
                                           " storage units registered with the controller at " +
                                           controller_->endpoint() + " within " + std::to_string(timeout_.count()) +
                                           " ms; start the missing ones");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace seqflow
