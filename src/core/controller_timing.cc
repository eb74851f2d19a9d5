// Controller: the measured workload models of the tasks (report_timing).
#include "core/controller_state.h"
#include "seqflow/controller.h"

namespace seqflow {

void Controller::report_timing(const std::string& task_name, std::span<const TimingRecord> records) {
  state_->task_workloads.report(task_name, records);
}

std::optional<TaskWorkload> Controller::task_workload(const std::string& task_name) const {
  return state_->task_workloads.of(task_name);
}

std::vector<TaskWorkload> Controller::task_workloads() const { return state_->task_workloads.all(); }

}  // namespace seqflow
