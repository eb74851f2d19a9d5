#include "client/remote_control_plane.h"

#include <thread>

#include "client/call_deadline.h"
#include "core/change_log.h"
#include "core/custom_meta.h"
#include "seqflow/error.h"
#include "seqflow/limits.h"
#include "transport/control_protocol.h"
#include "transport/wire_codec.h"

namespace seqflow {
namespace {

namespace control = transport::control;

// A blocking fetch may wait `request.timeout` at the controller: the call
// itself gets that long plus the usual round-trip allowance.
constexpr std::chrono::milliseconds kMaxCallTimeout = std::chrono::hours(24 * 365);

control::SamplesRequest samples_of(const std::string& partition_id, std::span<const int64_t> indexes,
                                   std::span<const uint64_t> generations) {
  return {partition_id, {indexes.begin(), indexes.end()}, {generations.begin(), generations.end()}};
}

std::vector<std::string> strings_of(std::span<const std::string> values) { return {values.begin(), values.end()}; }

}  // namespace

RemoteControlPlane::RemoteControlPlane(std::shared_ptr<transport::ConnectionPool> controller,
                                       std::chrono::milliseconds timeout)
    : controller_(std::move(controller)), timeout_(timeout) {}

transport::Frames RemoteControlPlane::call(std::string_view op, transport::Frames request) const {
  return call(op, std::move(request), CallDeadline::of_request(timeout_));
}

// One request on a pooled connection, and the frames of its reply.
transport::Frames RemoteControlPlane::call(std::string_view op, transport::Frames request,
                                           Clock::time_point deadline) const {
  CallDeadline::check_open(deadline, op, controller_->endpoint());
  auto lease = controller_->acquire();
  const uint64_t id = lease->send(op, std::move(request), deadline);
  return lease->receive(id, deadline);
}

BatchMeta RemoteControlPlane::insert(const std::string& partition_id, int64_t count, bool* created) {
  const auto deadline = CallDeadline::of_request(timeout_);
  // The controller refuses the insert once this budget is spent, so a client
  // that gave up leaves no samples behind. Relative: clocks differ between
  // machines. Rounded down: the controller must not outlast this client.
  const auto budget =
      std::min(std::chrono::floor<std::chrono::milliseconds>(deadline - Clock::now()), kMaxInsertBudget);
  if (budget.count() < 1) CallDeadline::throw_passed(control::kInsert, controller_->endpoint());
  control::CreatedBatch reply = control::decode_insert_reply(
      call(control::kInsert, control::encode_insert_request({partition_id, count, budget}), deadline));
  if (created) *created = reply.created;
  return std::move(reply.meta);
}

CommittedWrite RemoteControlPlane::mark_produced(const std::string& partition_id,
                                                 std::span<const int64_t> global_indexes,
                                                 std::span<const uint64_t> generations,
                                                 const std::map<std::string, FieldSchema>& fields,
                                                 std::span<const Value> custom_meta, uint64_t write_version) {
  core::check_meta_depths(global_indexes, custom_meta);
  const control::MarkProducedRequest request{samples_of(partition_id, global_indexes, generations),
                                             fields,
                                             {custom_meta.begin(), custom_meta.end()},
                                             write_version};
  const transport::Frames reply = call(control::kMarkProduced, control::encode_mark_produced_request(request));
  try {
    return control::decode_mark_produced_reply(reply, global_indexes.size());
  } catch (const Error& error) {
    // The controller committed (it replied): not a refusal, which would
    // have the writer discard the version it now names.
    throw Error(ErrorCode::kInternal, std::string(error.what()) + " (the write was committed)");
  }
}

BatchMeta RemoteControlPlane::get_meta(const MetaRequest& request) {
  const bool waits = request.mode == MetaMode::kFetch && !request.polling;
  const auto timeout = waits ? std::min(kMaxCallTimeout, request.timeout + timeout_) : timeout_;
  return control::decode_batch_reply(
      call(control::kGetMeta, control::encode_get_meta_request(request), CallDeadline::of_request(timeout)),
      control::kGetMeta);
}

void RemoteControlPlane::set_custom_meta(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                         std::span<const uint64_t> generations, std::span<const Value> custom_meta) {
  core::check_meta_depths(global_indexes, custom_meta);
  const control::SetCustomMetaRequest request{samples_of(partition_id, global_indexes, generations),
                                              {custom_meta.begin(), custom_meta.end()}};
  control::decode_empty_reply(call(control::kSetCustomMeta, control::encode_set_custom_meta_request(request)),
                              control::kSetCustomMeta);
}

std::vector<int64_t> RemoteControlPlane::clear_samples(const std::string& partition_id,
                                                       std::span<const int64_t> global_indexes,
                                                       std::span<const uint64_t> generations) {
  return control::decode_released_reply(call(control::kClearSamples, control::encode_samples_request(samples_of(
                                                                         partition_id, global_indexes, generations))),
                                        control::kClearSamples);
}

std::vector<int64_t> RemoteControlPlane::reclaim_unproduced(const std::string& partition_id,
                                                            std::span<const int64_t> global_indexes,
                                                            std::span<const uint64_t> generations) {
  return control::decode_released_reply(
      call(control::kReclaimUnproduced,
           control::encode_samples_request(samples_of(partition_id, global_indexes, generations))),
      control::kReclaimUnproduced);
}

std::vector<int64_t> RemoteControlPlane::clear_partition(const std::string& partition_id) {
  return control::decode_released_reply(call(control::kClearPartition, control::encode_partition_request(partition_id)),
                                        control::kClearPartition);
}

bool RemoteControlPlane::forget_partition_if_empty(const std::string& partition_id) {
  return control::decode_flag_reply(
      call(control::kForgetPartitionIfEmpty, control::encode_partition_request(partition_id)),
      control::kForgetPartitionIfEmpty);
}

void RemoteControlPlane::reset_consumption(const std::string& partition_id, const std::string* task_name) {
  const control::ResetConsumptionRequest request{partition_id, task_name ? std::optional(*task_name) : std::nullopt};
  control::decode_empty_reply(call(control::kResetConsumption, control::encode_reset_consumption_request(request)),
                              control::kResetConsumption);
}

size_t RemoteControlPlane::end_leases(const std::string& partition_id, const std::string& task_name,
                                      std::span<const int64_t> global_indexes, std::span<const uint64_t> generations,
                                      bool release, uint64_t lease) {
  const control::EndLeasesRequest request{
      {partition_id, {global_indexes.begin(), global_indexes.end()}, {generations.begin(), generations.end()}},
      task_name,
      release,
      lease};
  return control::decode_end_leases_reply(call(control::kEndLeases, control::encode_end_leases_request(request)));
}

std::optional<std::vector<std::pair<int64_t, bool>>> RemoteControlPlane::consumption_status(
    const std::string& task_name, const std::string& partition_id) const {
  return control::decode_consumption_status_reply(
      call(control::kConsumptionStatus, control::encode_task_request({task_name, partition_id})));
}

std::optional<ProductionStatus> RemoteControlPlane::production_status(std::span<const std::string> fields,
                                                                      const std::string& partition_id) const {
  return control::decode_production_status_reply(
      call(control::kProductionStatus, control::encode_fields_request({strings_of(fields), partition_id})),
      fields.size());
}

SampleProduction RemoteControlPlane::sample_production(const std::string& partition_id,
                                                       std::span<const int64_t> global_indexes,
                                                       std::span<const uint64_t> generations,
                                                       std::span<const std::string> fields) {
  const control::SampleProductionRequest request{samples_of(partition_id, global_indexes, generations),
                                                 strings_of(fields)};
  return control::decode_sample_production_reply(
      call(control::kSampleProduction, control::encode_sample_production_request(request)), global_indexes.size(),
      fields.size());
}

bool RemoteControlPlane::all_consumed(const std::string& task_name, const std::string& partition_id) const {
  return control::decode_flag_reply(
      call(control::kAllConsumed, control::encode_task_request({task_name, partition_id})), control::kAllConsumed);
}

bool RemoteControlPlane::all_produced(std::span<const std::string> fields, const std::string& partition_id) const {
  return control::decode_flag_reply(
      call(control::kAllProduced, control::encode_fields_request({strings_of(fields), partition_id})),
      control::kAllProduced);
}

void RemoteControlPlane::report_timing(const std::string& task_name, std::span<const TimingRecord> records) {
  control::decode_empty_reply(call(control::kReportTiming, control::encode_report_timing_request(task_name, records)),
                              control::kReportTiming);
}

std::optional<TaskWorkload> RemoteControlPlane::task_workload(const std::string& task_name) const {
  return control::decode_task_workload_reply(
      call(control::kTaskWorkload, control::encode_task_workload_request(task_name)), task_name);
}

std::vector<std::string> RemoteControlPlane::partition_list() const {
  return control::decode_partition_list_reply(call(control::kPartitionList, control::encode_bare_request()));
}

BatchMeta RemoteControlPlane::kv_resolve(const std::string& partition_id, std::span<const std::string> keys,
                                         std::span<const Value> tags, bool* created, std::vector<uint8_t>* made_keys) {
  core::check_tag_depths(keys, tags);
  control::CreatedBatch reply = control::decode_kv_resolve_reply(
      call(control::kKvResolve,
           control::encode_kv_resolve_request({partition_id, strings_of(keys), {tags.begin(), tags.end()}})));
  if (created) *created = reply.created;
  if (made_keys) *made_keys = std::move(reply.made_keys);
  return std::move(reply.meta);
}

BatchMeta RemoteControlPlane::kv_lookup(const std::string& partition_id, std::span<const std::string> keys) const {
  return control::decode_batch_reply(
      call(control::kKvLookup, control::encode_keys_request({partition_id, strings_of(keys)})), control::kKvLookup);
}

BatchMeta RemoteControlPlane::kv_find(const std::string& partition_id, std::span<const std::string> keys) const {
  return control::decode_batch_reply(
      call(control::kKvFind, control::encode_keys_request({partition_id, strings_of(keys)})), control::kKvFind);
}

std::vector<std::string> RemoteControlPlane::kv_keys(const std::string& partition_id,
                                                     std::span<const int64_t> global_indexes) const {
  return control::decode_kv_keys_reply(
      call(control::kKvKeys,
           control::encode_kv_keys_request({partition_id, {global_indexes.begin(), global_indexes.end()}})),
      global_indexes.size());
}

void RemoteControlPlane::set_policy_version(int64_t version) {
  control::decode_empty_reply(call(control::kSetPolicyVersion, control::encode_policy_version(version)),
                              control::kSetPolicyVersion);
}

int64_t RemoteControlPlane::policy_version() const {
  return control::decode_policy_version(call(control::kPolicyVersion, control::encode_bare_request()),
                                        transport::wire::reply_name(control::kPolicyVersion));
}

PolicyVersions RemoteControlPlane::policy_versions(const std::string& partition_id,
                                                   std::span<const int64_t> global_indexes) const {
  control::PolicyVersionsRequest request{
      partition_id, std::vector<int64_t>(global_indexes.begin(), global_indexes.end()), std::nullopt};
  return control::decode_policy_versions_reply(
      call(control::kPolicyVersions, control::encode_policy_versions_request(request)), global_indexes.size());
}

PolicyVersions RemoteControlPlane::kv_policy_versions(const std::string& partition_id,
                                                      std::span<const std::string> keys) const {
  control::PolicyVersionsRequest request{partition_id, std::nullopt, strings_of(keys)};
  return control::decode_policy_versions_reply(
      call(control::kPolicyVersions, control::encode_policy_versions_request(request)), keys.size());
}

std::vector<PartitionKeys> RemoteControlPlane::kv_list(const std::string* partition_id) const {
  std::lock_guard lock(listings_mutex_);
  std::map<std::string, ListingVersion> known;
  for (const auto& [name, listing] : listings_) {
    if (partition_id == nullptr || name == *partition_id) known[name] = listing.version();
  }
  transport::Frames reply =
      call(control::kKvList,
           control::encode_kv_list_request({partition_id ? std::optional(*partition_id) : std::nullopt, known}));
  std::vector<PartitionKeys> listed = control::decode_kv_list_reply(reply);
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
  return control::decode_released_reply(
      call(control::kKvClear, control::encode_keys_request({partition_id, strings_of(keys)})), control::kKvClear);
}

ReplayPass RemoteControlPlane::replay_pass(const ReplayRequest& request) {
  return control::decode_replay_pass_reply(call(control::kReplayPass, control::encode_replay_pass_request(request)));
}

WatchBatch RemoteControlPlane::watch(const WatchRequest& request) {
  core::check_watch_request(request);  // named here as an embedded controller names it, before any call
  return control::decode_watch_reply(
      call(control::kWatch, control::encode_watch_request(request), CallDeadline::of_request(request.wait + timeout_)));
}

ReplayAck RemoteControlPlane::ack_replay_pass(const std::string& partition_id, uint64_t pass_id) {
  return control::decode_ack_replay_pass_reply(
      call(control::kAckReplayPass, control::encode_ack_replay_pass_request({partition_id, pass_id})));
}

ReissuedPrompts RemoteControlPlane::reissue_inflight_prompts(const std::string& partition_id, int64_t global_steps,
                                                             bool member_status) {
  return control::decode_reissue_reply(call(
      control::kReissueInflightPrompts, control::encode_reissue_request({partition_id, global_steps, member_status})));
}

void RemoteControlPlane::save(const std::string& path) const {
  control::decode_empty_reply(call(control::kSave, control::encode_path_request(path)), control::kSave);
}

void RemoteControlPlane::load(const std::string& path) {
  control::decode_empty_reply(call(control::kLoad, control::encode_path_request(path)), control::kLoad);
}

void RemoteControlPlane::hello() const {
  const std::string controller = "the controller at " + controller_->endpoint();
  int64_t protocol = 0;
  try {
    protocol = control::decode_hello(call(control::kHello, control::encode_hello(control::kProtocolVersion)),
                                     transport::wire::reply_name(control::kHello));
  } catch (const Error& error) {
    // A controller without hello predates protocol versions: it answers as
    // any service does to an operation it does not know, listing the ones it
    // handles, storage_units among them. Any other service is no controller:
    // its own answer says so.
    const std::string_view message = error.what();
    const std::string unknown = "unknown operation '" + std::string(control::kHello) + "'";
    const bool older_controller = error.code() == ErrorCode::kNotFound &&
                                  message.find(unknown) != std::string_view::npos &&
                                  message.find(control::kStorageUnits) != std::string_view::npos;
    if (!older_controller) throw;
    throw Error(ErrorCode::kInvalidArgument, control::protocol_mismatch("this client", controller, std::nullopt));
  }

  if (protocol != control::kProtocolVersion) {
    throw Error(ErrorCode::kInvalidArgument, control::protocol_mismatch("this client", controller, protocol));
  }
}

std::vector<std::string> RemoteControlPlane::storage_units() const {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    control::StorageUnitsReply reply = control::decode_storage_units_reply(
        call(control::kStorageUnits, control::encode_bare_request()), control::kStorageUnits);
    const int64_t expected = reply.expected;
    if (expected > 0 && reply.units.size() == static_cast<size_t>(expected)) return std::move(reply.units);
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error(ErrorCode::kTimeout, std::to_string(reply.units.size()) + " of " + std::to_string(expected) +
                                           " storage units registered with the controller at " +
                                           controller_->endpoint() + " within " + std::to_string(timeout_.count()) +
                                           " ms; start the missing ones");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace seqflow
