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
  // Every record is checked before any is taken: a bad one changes nothing.
  void report(const std::string& task_name, std::span<const TimingRecord> records);
  // The task's current fit; nullopt until it has one (too few reports).
  std::optional<Workload> fitted(const std::string& task_name) const;
  // Every task that has reports, by name.
  std::vector<TaskWorkload> all() const;
  std::optional<TaskWorkload> of(const std::string& task_name) const;

 private:
  OnlineWorkload& model(const std::string& task_name);
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<OnlineWorkload>> models_;
};

}  // namespace seqflow::core
