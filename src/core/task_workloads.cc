#include "core/task_workloads.h"

#include "balance/calibration_checks.h"
#include "core/name_rule.h"

namespace seqflow::core {
namespace {

TaskWorkload describe(const std::string& task_name, const OnlineWorkload& model) {
  Workload current = model.current();
  const bool fitted = current.kind() == Workload::Kind::kCalibrated;
  return TaskWorkload{task_name, std::move(current), model.reports(), fitted};
}

}  // namespace

void TaskWorkloads::report(const std::string& task_name, std::span<const TimingRecord> records) {
  check_name(task_name, "task_name");
  for (size_t i = 0; i < records.size(); ++i) {
    calibration::check_timing(records[i].lengths, records[i].seconds, "records[" + std::to_string(i) + "].");
  }
  if (records.empty()) return;
  OnlineWorkload& online = model(task_name);
  for (const TimingRecord& record : records) online.report(record.lengths, record.seconds);
}

OnlineWorkload& TaskWorkloads::model(const std::string& task_name) {
  std::lock_guard lock(mutex_);
  auto& slot = models_[task_name];
  if (!slot) slot = std::make_unique<OnlineWorkload>();
  return *slot;
}

std::optional<Workload> TaskWorkloads::fitted(const std::string& task_name) const {
  std::lock_guard lock(mutex_);
  const auto found = models_.find(task_name);
  if (found == models_.end()) return std::nullopt;
  Workload current = found->second->current();
  if (current.kind() != Workload::Kind::kCalibrated) return std::nullopt;
  return current;
}

std::optional<TaskWorkload> TaskWorkloads::of(const std::string& task_name) const {
  std::lock_guard lock(mutex_);
  const auto found = models_.find(task_name);
  if (found == models_.end()) return std::nullopt;
  return describe(task_name, *found->second);
}

std::vector<TaskWorkload> TaskWorkloads::all() const {
  std::lock_guard lock(mutex_);
  std::vector<TaskWorkload> out;
  out.reserve(models_.size());
  for (const auto& [task_name, model] : models_) out.push_back(describe(task_name, *model));
  return out;
}

}  // namespace seqflow::core
