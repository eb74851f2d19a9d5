// The measured workload model of each task: the ranks report how long their
// micro-batches took (Controller::report_timing) and each task's
// OnlineWorkload refits in the background. Samplers asked to balance the
// "online" workload balance the task's fit. Its own lock: a report never
// waits for a fetch.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "seqflow/calibration.h"
#include "seqflow/controller.h"

namespace seqflow::core {

class TaskWorkloads {
 public:
  // Every task's model learns with `options`.
  explicit TaskWorkloads(OnlineOptions options = {});
  // Every record is checked before any is taken: a bad one changes nothing.
  void report(const std::string& task_name, std::span<const TimingRecord> records);
  // The task's current fit; nullopt until it has one (too few reports).
  std::optional<Workload> fitted(const std::string& task_name) const;
  // Every task that has reports, by name.
  std::vector<TaskWorkload> all() const;
  std::optional<TaskWorkload> of(const std::string& task_name) const;

  // Models by task name; shared so that a report in flight keeps its model
  // alive while replace() swaps the set.
  using Models = std::map<std::string, std::shared_ptr<OnlineWorkload>>;
  // Every task's model state (a controller checkpoint saves them).
  std::map<std::string, OnlineWorkloadState> states() const;
  // Models resumed from saved states, learning on with this set's options;
  // built aside so that a load changes nothing until everything it holds is
  // valid. Throws kInvalidArgument naming the task and what is wrong.
  Models resume(const std::map<std::string, OnlineWorkloadState>& states) const;
  // Every model replaced by `models` (a load; tasks not in it start over).
  void replace(Models models);

 private:
  std::shared_ptr<OnlineWorkload> model(const std::string& task_name);
  const OnlineOptions options_;
  mutable std::mutex mutex_;
  Models models_;
};

}  // namespace seqflow::core
