// Fetches that lease their samples (MetaRequest::lease): the samples are
// consumed as any fetch's, and the task holds them for the lease's time.
// Acknowledging ends the lease and keeps them consumed; releasing it, or its
// expiry, gives them back to the task (the controller makes them unconsumed),
// so that the work of a consumer that died or stalled is served again, and
// acknowledged work never is. A sample is leased to a task at most once at a
// time: a leased sample is consumed, so no other fetch of the task gets it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace seqflow::core {

class FetchLeases {
 public:
  using Clock = std::chrono::steady_clock;

  // Samples by index, each with its generation.
  struct Samples {
    std::vector<int64_t> indexes;
    std::vector<uint64_t> generations;
    size_t size() const { return indexes.size(); }
  };
  // One expired lease: the samples still held under it.
  struct Expired {
    std::string partition_id;
    std::string task_name;
    Samples samples;
  };

  // Leases the samples (one generation per index) to the task until
  // `expiry`, and returns the lease's id (never 0). All or nothing: on an
  // exception (out of memory) nothing is leased.
  uint64_t lease(const std::string& partition_id, const std::string& task_name, std::span<const int64_t> indexes,
                 std::span<const uint64_t> generations, Clock::time_point expiry);

  // Ends the task's leases of these samples (of these generations; empty:
  // any) held under lease `lease` (0: under any lease). Returns the samples
  // whose lease it ended, in the order given. It allocates before it
  // changes anything: out of memory, nothing ends.
  Samples end(const std::string& partition_id, const std::string& task_name, std::span<const int64_t> indexes,
              std::span<const uint64_t> generations, uint64_t lease);

  // Drops the leases of the task (null: of every task) in the partition,
  // giving nothing back: its consumption was reset or its samples cleared.
  // Call it before the change: it may throw (out of memory), changing nothing.
  void forget(const std::string& partition_id, const std::string* task_name);
  // Drops every task's leases of these samples of the partition: they are
  // gone. Never throws; out of memory, entries stay, which the samples'
  // generations tell apart from any later sample at the same index.
  void forget_samples(const std::string& partition_id, std::span<const int64_t> indexes) noexcept;

  // Removes the earliest lease if it expired by `now`, and returns what it
  // held. It allocates before it changes anything: out of memory, the lease
  // stays, expired, for the next call.
  std::optional<Expired> expire_next(Clock::time_point now);

  // The earliest expiry of a lease still held; nothing without leases.
  std::optional<Clock::time_point> next_expiry() const;

  // Whether the task holds a lease of the sample (index and generation) in the partition.
  bool holds(const std::string& partition_id, const std::string& task_name, int64_t index, uint64_t generation) const;

  size_t leased_samples() const;
  // The task's leased samples in the partition.
  size_t leased_samples(const std::string& partition_id, const std::string& task_name) const;

  void clear();

 private:
  using TaskKey = std::pair<std::string, std::string>;  // partition, task
  struct Held {
    uint64_t generation = 0;
    uint64_t lease = 0;
  };
  // One fetch's lease: the samples it leased, of which `held` are still under it.
  struct Lease {
    TaskKey task;
    Clock::time_point expiry;
    std::vector<int64_t> indexes;
    size_t held = 0;
  };

  // One sample of the lease no longer held under it; the lease goes with its last.
  void release_one(uint64_t lease);

  std::map<TaskKey, std::unordered_map<int64_t, Held>> held_;
  std::map<uint64_t, Lease> leases_;
  std::set<std::pair<Clock::time_point, uint64_t>> expiries_;
  uint64_t next_lease_ = 1;
  size_t leased_ = 0;
};

}  // namespace seqflow::core
