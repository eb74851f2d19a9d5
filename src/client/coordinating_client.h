// The client over a control plane and a data plane: the embedded client (a
// Controller and a StorageUnit in this process) and the remote client (a
// controller service and storage services) are this one class with different
// planes, so puts, rollbacks, key-value calls and checkpoints behave the same
// in both modes.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "seqflow/client.h"
#include "seqflow/controller.h"
#include "seqflow/storage.h"

namespace seqflow {

// Who drops the data of released samples. In remote mode other processes
// may be handed a released global index at once, so the controller service
// drops the data before it hands the index out again; here that would be a
// second, racing drop.
enum class ReleasedData { kDroppedByClient, kDroppedByControlPlane };

// Thread-safe. Puts and reads run concurrently; clears and checkpoints wait
// for this client's puts in flight (so a released global index is never
// reused by a put while its old values are being dropped), get_meta never
// waits for them.
//
// With a `put_timeout` (remote mode), each put and its rollback share one
// deadline, put_timeout from the put's start: the rollback gets what the
// put left, but at least kRollbackFloorShare of put_timeout (at most
// kMaxRollbackFloor), so that the undo requests of a put that failed at its
// deadline are still sent and briefly awaited. A failed put thus returns
// within 1.25x put_timeout, not one full timeout per rollback step.
class CoordinatingClient final : public Client {
 public:
  static constexpr int kRollbackFloorShare = 4;  // a quarter
  static constexpr std::chrono::milliseconds kMaxRollbackFloor{1000};

  // Writes a checkpoint's controller file and storage file. Remote mode
  // writes both in one cut (the controller holds writes while its units
  // save); the default saves the control plane, then the data plane.
  using SaveParts = std::function<void(const std::string& controller_path, const std::string& storage_path)>;

  CoordinatingClient(std::shared_ptr<ControlPlane> control, std::shared_ptr<DataPlane> data, ReleasedData released,
                     std::chrono::milliseconds put_timeout = {}, SaveParts save_parts = {});

  BatchMeta put_new(const std::string& partition_id, const std::vector<Column>& columns,
                    std::span<const Value> custom_meta) override;
  BatchMeta put_existing(const BatchMeta& meta, const std::vector<Column>& columns,
                         std::span<const Value> custom_meta) override;

  BatchMeta get_meta(const MetaRequest& request) override;
  std::vector<std::vector<SampleView>> get_data(const BatchMeta& meta, std::span<const std::string> fields) override;

  ControlPlane& control() override { return *control_; }
  const DataPlane& data() const { return *data_; }

  void clear_samples(const std::string& partition_id, std::span<const int64_t> global_indexes,
                     std::span<const uint64_t> generations) override;
  void clear_partition(const std::string& partition_id) override;

  BatchMeta kv_put(const std::string& partition_id, std::span<const std::string> keys, std::span<const Value> tags,
                   const std::vector<Column>& columns) override;
  BatchMeta kv_meta(const std::string& partition_id, std::span<const std::string> keys) override;
  void kv_clear(const std::string& partition_id, std::span<const std::string> keys) override;
  // The longest replay_pass sleeps after an idle pass (of its wait_ms).
  static constexpr std::chrono::milliseconds kReplayIdleWait{50};
  ReplayPass replay_pass(const ReplayRequest& request) override;
  bool ack_replay_pass(const std::string& partition_id, uint64_t pass_id) override;
  ReissuedPrompts reissue_inflight_prompts(const std::string& partition_id, int64_t global_steps,
                                           bool member_status) override;

  void save_checkpoint(const std::string& directory, const Value& user_metadata) override;
  Value load_checkpoint(const std::string& directory) override;

  StorageStats storage_stats() const override { return data_->stats(); }
  std::optional<CapacityStats> capacity_stats() const override;

 private:
  class PutDeadline;
  using Mutex = std::shared_timed_mutex;  // timed: a rollback waits for the lock until its deadline only

  // put_existing without taking the lock (kv_put holds it already: `lock`).
  BatchMeta write_existing(const BatchMeta& meta, const std::vector<Column>& columns,
                           std::span<const Value> custom_meta, std::shared_lock<Mutex>& lock);
  // SampleKeys::around_wait of a put of `samples` holding `lock`: released
  // while the put waits for room, so that this client's clears can make it.
  // Taken back, it ends the put (kStaleSample, nothing stored) if meanwhile
  // a checkpoint was loaded or a clear released one of `samples`.
  using AroundWait = std::function<void(const std::function<void()>&)>;
  AroundWait unlocked_while_waiting(std::shared_lock<Mutex>& lock, const BatchMeta& samples);
  // What ran under the exclusive lock; a waiting put compares before and after.
  struct Interruptions {
    uint64_t checkpoints_loaded = 0;
    uint64_t clears = 0;  // clears and replay passes: they release samples
  };
  void check_still_owned(const Interruptions& before, const BatchMeta& samples);
  // Tells the units holding `samples` that `write_version` of `fields` is
  // committed (they drop older versions) or refused (they drop it), with
  // the version's write tags (remote). Best effort: readers name only
  // committed versions either way.
  void settle_staged(const BatchMeta& samples, std::span<const std::string> fields, uint64_t write_version,
                     std::span<const uint64_t> write_tags, bool commit);
  void drop_released(const std::vector<int64_t>& released);
  // After a failed put: releases those of `samples` (of one partition) that
  // nothing was produced in, and drops their data where this client drops
  // data. The number released; nullopt when the controller did not answer.
  std::optional<size_t> release_unproduced(const std::string& partition_id, const BatchMeta& samples);
  // Whether every one of `samples` (of one partition) lives with every field
  // of `schemas` produced; nullopt when the controller did not answer.
  std::optional<bool> produced_whole(const std::string& partition_id, const BatchMeta& samples,
                                     const std::map<std::string, FieldSchema>& schemas);
  // After a failed put that created `partition_id`: removes it if no sample
  // is left. Trades the shared `lock` for the exclusive one.
  void forget_partition_if_empty(std::shared_lock<Mutex>& lock, const std::string& partition_id,
                                 const PutDeadline& deadline);

  std::shared_ptr<ControlPlane> control_;
  std::shared_ptr<DataPlane> data_;
  ReleasedData released_;
  std::chrono::milliseconds put_timeout_;  // zero: no put deadline (embedded)
  SaveParts save_parts_;
  // Shared: puts and reads. Exclusive: clears, checkpoints.
  mutable Mutex mutex_;
  Interruptions interruptions_;  // written under the exclusive lock, read under either
};

}  // namespace seqflow
