// The controller's private state: data, sampler, and the lock and condition
// variable that every call and every blocking fetch go through.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>

#include "core/control_data.h"
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
  // Saves share path + ".tmp": one at a time.
  mutable std::mutex save_mutex;
  core::ControlData data;
  // Not under `mutex`: reports take their own lock, fetches read a snapshot.
  core::TaskWorkloads task_workloads;
};

}  // namespace seqflow
