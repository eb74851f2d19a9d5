// The controller's private state: data, sampler, and the lock and condition
// variable that every call and every blocking fetch go through.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/change_log.h"
#include "core/control_data.h"
#include "core/fetch_leases.h"
#include "core/replay_groups.h"
#include "core/replay_index.h"
#include "core/replay_leases.h"
#include "core/task_workloads.h"
#include "seqflow/controller.h"
#include "seqflow/sampler.h"

namespace seqflow {

struct Controller::State {
  explicit State(OnlineOptions task_workload_options) : task_workloads(std::move(task_workload_options)) {}
  std::shared_ptr<Sampler> sampler;
  bool polling_mode = false;
  mutable std::mutex mutex;
  // Notified whenever samples may have become ready (or their partition
  // went away), so that blocked fetches re-check without polling.
  std::condition_variable changed;
  // Controller::on_change's listener; called under `mutex`.
  std::function<void(const std::string* partition_id)> change_listener;
  // Saves share path + ".tmp": one at a time.
  mutable std::mutex save_mutex;
  core::ControlData data;
  // Not under `mutex`: reports take their own lock, fetches read a snapshot.
  core::TaskWorkloads task_workloads;
  core::FetchLeases leases;
  // Under `mutex`: the changes of watched partitions (Controller::watch).
  core::ChangeLogs change_logs;
  // Per partition: replay_pass's index of keys and tags, and its DAPO classification of finished groups.
  std::map<std::string, core::ReplayIndex> replay_indexes;
  std::map<std::string, core::GroupFilterCache> group_filters;
  // replay_pass's passes kept under a pass_id, and the prompts they hold.
  core::ReplayLeases replay_leases;

  // Under `mutex`: the samples (of these generations; empty: any) become
  // unconsumed by the task again, each before the next consumed one in
  // arrival order; those gone, reused or unconsumed are skipped. Returns how
  // many it gave back (and tells the waiters when any).
  size_t give_back(const std::string& partition_id, const std::string& task_name, std::span<const int64_t> indexes,
                   std::span<const uint64_t> generations);
  // Under `mutex`: gives back what the leases expired by now held.
  void expire_leases();
  // Under `mutex`: ends the kept replay passes whose lease ended; their held
  // prompts are logged as tagged (their tags unchanged) for watchers, who
  // learn that those groups are sampleable again, and the waiters told.
  void expire_replay_passes();
  // Under `mutex`: the slots of the prompts the partition's kept passes hold
  // (those not cleared meanwhile, nor their index reused).
  std::unordered_set<uint32_t> held_replay_slots(const core::PartitionState& partition) const;

  // Under `mutex`: wakes blocked fetches and tells the listener, for one
  // partition or (null) any. Called once a change is made: a listener's
  // exception has no caller to fail (the op stands), so it terminates.
  void notify_changed(const std::string* partition_id) noexcept {
    changed.notify_all();
    if (change_listener) change_listener(partition_id);
  }
};

}  // namespace seqflow
