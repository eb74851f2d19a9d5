#include "core/task_workloads.h"

#include <utility>

#include "balance/calibration_checks.h"
#include "core/name_rule.h"
#include "seqflow/error.h"

namespace seqflow::core {
namespace {

TaskWorkload describe(const std::string& task_name, const OnlineWorkload& model) {
  Workload current = model.current();
  const bool fitted = current.kind() == Workload::Kind::kCalibrated;
  return TaskWorkload{task_name, std::move(current), model.reports(), fitted};
}

}  // namespace

TaskWorkloads::TaskWorkloads(OnlineOptions options) : options_(std::move(options)) {}

void TaskWorkloads::report(const std::string& task_name, std::span<const TimingRecord> records) {
  check_name(task_name, "task_name");
  for (size_t i = 0; i < records.size(); ++i) {
    calibration::check_timing(records[i].lengths, records[i].seconds, "records[" + std::to_string(i) + "].");
  }
  if (records.empty()) return;
  const std::shared_ptr<OnlineWorkload> online = model(task_name);
  for (const TimingRecord& record : records) online->report(record.lengths, record.seconds);
}

std::shared_ptr<OnlineWorkload> TaskWorkloads::model(const std::string& task_name) {
  std::lock_guard lock(mutex_);
  auto& slot = models_[task_name];
  if (!slot) slot = std::make_shared<OnlineWorkload>(Workload::tokens(), options_);
  return slot;
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

std::map<std::string, OnlineWorkloadState> TaskWorkloads::states() const {
  std::lock_guard lock(mutex_);
  std::map<std::string, OnlineWorkloadState> out;
  for (const auto& [task_name, model] : models_) out.emplace(task_name, model->state());
  return out;
}

TaskWorkloads::Models TaskWorkloads::resume(const std::map<std::string, OnlineWorkloadState>& states) const {
  Models models;
  for (const auto& [task_name, state] : states) {
    try {
      check_name(task_name, "task_name");
      models.emplace(task_name, std::make_shared<OnlineWorkload>(state, options_));
    } catch (const Error& error) {
      throw Error(error.code(), "task '" + task_name + "': " + error.what());
    }
  }
  return models;
}

void TaskWorkloads::replace(Models models) {
  {
    std::lock_guard lock(mutex_);
    models_.swap(models);
  }
  // `models` now holds the replaced ones: their refit threads join here, outside the lock.
}

}  // namespace seqflow::core
