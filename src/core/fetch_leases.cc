#include "core/fetch_leases.h"

#include <iterator>
#include <tuple>

namespace seqflow::core {

uint64_t FetchLeases::lease(const std::string& partition_id, const std::string& task_name,
                            std::span<const int64_t> indexes, std::span<const uint64_t> generations,
                            Clock::time_point expiry) {
  if (indexes.empty()) return 0;
  const uint64_t id = next_lease_;
  // What may throw comes first, and changes nothing it does not undo.
  std::unordered_map<int64_t, Held> fresh;
  fresh.reserve(indexes.size());
  for (size_t i = 0; i < indexes.size(); ++i) fresh.try_emplace(indexes[i], Held{generations[i], id});
  TaskKey key{partition_id, task_name};
  const auto lease =
      leases_.emplace(id, Lease{key, expiry, std::vector<int64_t>(indexes.begin(), indexes.end()), fresh.size()}).first;
  auto task = held_.end();
  bool task_added = false;
  try {
    expiries_.emplace(expiry, id);
    std::tie(task, task_added) = held_.try_emplace(std::move(key));
    task->second.reserve(task->second.size() + fresh.size());  // so that merge below moves nodes without rehashing
  } catch (...) {
    expiries_.erase({expiry, id});
    leases_.erase(lease);
    if (task_added) held_.erase(task);
    throw;
  }
  std::unordered_map<int64_t, Held>* held = &task->second;
  next_lease_ = id + 1;
  const size_t asked = fresh.size();
  held->merge(fresh);
  leased_ += asked - fresh.size();
  for (const auto& [index, sample] : fresh) {  // leased again before its lease ended: the new lease holds it
    Held& earlier = held->at(index);
    release_one(earlier.lease);
    earlier = sample;
  }
  return id;
}

FetchLeases::Samples FetchLeases::end(const std::string& partition_id, const std::string& task_name,
                                      std::span<const int64_t> indexes, std::span<const uint64_t> generations,
                                      uint64_t lease) {
  Samples ended;
  auto task = held_.find(TaskKey{partition_id, task_name});
  if (task == held_.end()) return ended;
  ended.indexes.reserve(indexes.size());
  ended.generations.reserve(indexes.size());
  for (size_t i = 0; i < indexes.size(); ++i) {
    auto sample = task->second.find(indexes[i]);
    if (sample == task->second.end()) continue;
    if (!generations.empty() && sample->second.generation != generations[i]) continue;
    if (lease != 0 && sample->second.lease != lease) continue;  // an earlier holder's: not its to end
    ended.indexes.push_back(indexes[i]);
    ended.generations.push_back(sample->second.generation);
    release_one(sample->second.lease);
    task->second.erase(sample);
    --leased_;
  }
  if (task->second.empty()) held_.erase(task);
  return ended;
}

void FetchLeases::forget(const std::string& partition_id, const std::string* task_name) {
  for (auto task = held_.lower_bound(TaskKey{partition_id, ""});
       task != held_.end() && task->first.first == partition_id;) {
    if (task_name != nullptr && task->first.second != *task_name) {
      ++task;
      continue;
    }
    for (const auto& [index, held] : task->second) release_one(held.lease);
    leased_ -= task->second.size();
    task = held_.erase(task);
  }
}

void FetchLeases::forget_samples(const std::string& partition_id, std::span<const int64_t> indexes) noexcept {
  if (held_.empty() || indexes.empty()) return;
  std::map<TaskKey, std::unordered_map<int64_t, Held>>::iterator task;
  try {
    task = held_.lower_bound(TaskKey{partition_id, ""});
  } catch (...) {
    return;  // no memory for the key: the entries stay, told apart from later samples by their generations
  }
  while (task != held_.end() && task->first.first == partition_id) {
    for (int64_t index : indexes) {
      const auto sample = task->second.find(index);
      if (sample == task->second.end()) continue;
      release_one(sample->second.lease);
      task->second.erase(sample);
      --leased_;
    }
    task = task->second.empty() ? held_.erase(task) : std::next(task);
  }
}

std::optional<FetchLeases::Expired> FetchLeases::expire_next(Clock::time_point now) {
  if (expiries_.empty() || expiries_.begin()->first > now) return std::nullopt;
  const uint64_t id = expiries_.begin()->second;
  const auto lease = leases_.find(id);
  const auto task = held_.find(lease->second.task);
  Expired out{lease->second.task.first, lease->second.task.second, {}};
  out.samples.indexes.reserve(lease->second.held);
  out.samples.generations.reserve(lease->second.held);
  // Nothing allocates from here.
  for (int64_t index : lease->second.indexes) {
    const auto sample = task->second.find(index);
    if (sample == task->second.end() || sample->second.lease != id) continue;
    out.samples.indexes.push_back(index);
    out.samples.generations.push_back(sample->second.generation);
    task->second.erase(sample);
    --leased_;
  }
  if (task->second.empty()) held_.erase(task);
  expiries_.erase(expiries_.begin());
  leases_.erase(lease);
  return out;
}

std::optional<FetchLeases::Clock::time_point> FetchLeases::next_expiry() const {
  if (expiries_.empty()) return std::nullopt;
  return expiries_.begin()->first;
}

bool FetchLeases::holds(const std::string& partition_id, const std::string& task_name, int64_t index,
                        uint64_t generation) const {
  const auto task = held_.find(TaskKey{partition_id, task_name});
  if (task == held_.end()) return false;
  const auto sample = task->second.find(index);
  return sample != task->second.end() && sample->second.generation == generation;
}

size_t FetchLeases::leased_samples() const { return leased_; }

size_t FetchLeases::leased_samples(const std::string& partition_id, const std::string& task_name) const {
  auto task = held_.find(TaskKey{partition_id, task_name});
  return task == held_.end() ? 0 : task->second.size();
}

void FetchLeases::clear() {
  held_.clear();
  leases_.clear();
  expiries_.clear();
  leased_ = 0;
}

void FetchLeases::release_one(uint64_t id) {
  auto lease = leases_.find(id);
  if (lease == leases_.end() || --lease->second.held > 0) return;
  expiries_.erase({lease->second.expiry, id});
  leases_.erase(lease);
}

}  // namespace seqflow::core
