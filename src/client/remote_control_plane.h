// The control plane of a controller service, reached over ZeroMQ: every
// ControlPlane call is one request on a pooled connection.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "transport/connection.h"
#include "seqflow/controller.h"

namespace seqflow {

class RemoteControlPlane final : public ControlPlane {
 public:
  RemoteControlPlane(std::shared_ptr<transport::ConnectionPool> controller, std::chrono::milliseconds timeout);

  BatchMeta insert(const std::string& partition_id, int64_t count, bool* created = nullptr) override;
  CommittedWrite mark_produced(const std::string& partition_id, std::span<const int64_t> global_indexes,
                               std::span<const uint64_t> generations, const std::map<std::string, FieldSchema>& fields,
                               std::span<const Value> custom_meta, uint64_t write_version = 0) override;
  BatchMeta get_meta(const MetaRequest& request) override;
  void set_custom_meta(const std::string& partition_id, std::span<const int64_t> global_indexes,
                       std::span<const uint64_t> generations, std::span<const Value> custom_meta) override;
  std::vector<int64_t> clear_samples(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                     std::span<const uint64_t> generations) override;
  std::vector<int64_t> clear_partition(const std::string& partition_id) override;
  std::vector<int64_t> reclaim_unproduced(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                          std::span<const uint64_t> generations) override;
  bool forget_partition_if_empty(const std::string& partition_id) override;
  void reset_consumption(const std::string& partition_id, const std::string* task_name) override;
  size_t end_leases(const std::string& partition_id, const std::string& task_name,
                    std::span<const int64_t> global_indexes, std::span<const uint64_t> generations, bool release,
                    uint64_t lease) override;
  std::optional<std::vector<std::pair<int64_t, bool>>> consumption_status(
      const std::string& task_name, const std::string& partition_id) const override;
  std::optional<ProductionStatus> production_status(std::span<const std::string> fields,
                                                    const std::string& partition_id) const override;
  SampleProduction sample_production(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                     std::span<const uint64_t> generations,
                                     std::span<const std::string> fields) override;
  bool all_consumed(const std::string& task_name, const std::string& partition_id) const override;
  bool all_produced(std::span<const std::string> fields, const std::string& partition_id) const override;
  std::vector<std::string> partition_list() const override;
  void report_timing(const std::string& task_name, std::span<const TimingRecord> records) override;
  std::optional<TaskWorkload> task_workload(const std::string& task_name) const override;
  BatchMeta kv_resolve(const std::string& partition_id, std::span<const std::string> keys, std::span<const Value> tags,
                       bool* created = nullptr, std::vector<uint8_t>* made_keys = nullptr) override;
  BatchMeta kv_lookup(const std::string& partition_id, std::span<const std::string> keys) const override;
  BatchMeta kv_find(const std::string& partition_id, std::span<const std::string> keys) const override;
  std::vector<std::string> kv_keys(const std::string& partition_id,
                                   std::span<const int64_t> global_indexes) const override;
  std::vector<PartitionKeys> kv_list(const std::string* partition_id) const override;
  std::vector<int64_t> kv_clear(const std::string& partition_id, std::span<const std::string> keys) override;
  // The service never waits in a pass (it holds inserts while it releases).
  ReplayPass replay_pass(const ReplayRequest& request) override;
  // Waits at the controller (a waiter there, no thread): the call's deadline
  // is request.wait plus the client's timeout.
  WatchBatch watch(const WatchRequest& request) override;
  ReplayAck ack_replay_pass(const std::string& partition_id, uint64_t pass_id) override;
  void set_policy_version(int64_t version) override;
  int64_t policy_version() const override;
  PolicyVersions policy_versions(const std::string& partition_id,
                                 std::span<const int64_t> global_indexes) const override;
  PolicyVersions kv_policy_versions(const std::string& partition_id, std::span<const std::string> keys) const override;
  ReissuedPrompts reissue_inflight_prompts(const std::string& partition_id, int64_t global_steps,
                                           bool member_status) override;
  void save(const std::string& path) const override;
  void load(const std::string& path) override;

  // The storage units' endpoints (ordered: sample gi on unit (gi / 64) % N) once all
  // the controller expects have registered; kTimeout if they do not in time.
  // Refuses (kInvalidArgument, naming both versions) a controller that
  // speaks another wire protocol than this client (control::kProtocolVersion).
  void hello() const;
  std::vector<std::string> storage_units() const;

 private:
  using Clock = transport::Connection::Clock;

  // By CallDeadline::of_request(timeout_): the timeout, cut to the deadline
  // of the client call this request is part of.
  transport::Frames call(std::string_view op, transport::Frames request) const;
  transport::Frames call(std::string_view op, transport::Frames request, Clock::time_point deadline) const;

  std::shared_ptr<transport::ConnectionPool> controller_;
  std::chrono::milliseconds timeout_;
  // The last kv_list answer per partition: the controller answers a poll of
  // an unchanged partition (verl's replay buffer lists every partition on
  // every poll) without sending its keys again. One kv_list at a time, so
  // each request names the listings the previous answers left.
  mutable std::mutex listings_mutex_;
  mutable std::map<std::string, PartitionKeys> listings_;
};

}  // namespace seqflow
