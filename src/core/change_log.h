// The controller's watch logs (ControlPlane::watch): per watched partition, a
// ring of its latest changes, each numbered from one counter of the
// controller. A partition gets a log at its first watch call and loses it
// when nobody watched it for kWatchIdleLimit (or a checkpoint is loaded), so
// an unwatched partition records nothing. Appending is O(1); a read costs
// the changes since its cursor.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/partition_state.h"
#include "seqflow/watch.h"

namespace seqflow::core {

class ChangeLogs {
 public:
  using Clock = std::chrono::steady_clock;

  // A change as logged: its tag still MessagePack.
  struct Logged {
    uint64_t sequence = 0;
    ChangeKind kind = ChangeKind::kInserted;
    int64_t global_index = -1;
    std::optional<std::string> key;
    std::optional<std::string> tag;
  };

  explicit ChangeLogs(size_t capacity = kWatchLogCapacity) : capacity_(capacity) {}

  // Whether `partition_id` records changes (cheap: a map lookup, none at
  // all while nothing is watched). An idle log goes here.
  bool watched(const std::string& partition_id, Clock::time_point now);

  // What a change of these live samples logs (nothing when unwatched);
  // `tagged`: with each sample's tag as it is now (none where it is {}). Made before a release
  // (the keys go with the samples), appended after it: may throw, changing nothing.
  std::vector<Logged> describe(const std::string& partition_id, const PartitionState& partition, ChangeKind kind,
                               std::span<const uint32_t> slots, bool tagged, Clock::time_point now);
  // Appends what describe made. Never throws: out of memory, the log is
  // emptied and its watchers told to resync.
  void append(const std::string& partition_id, std::vector<Logged> changes) noexcept;
  // describe + append, after a change that keeps the samples.
  void record(const std::string& partition_id, const PartitionState& partition, ChangeKind kind,
              std::span<const uint32_t> slots, bool tagged) noexcept;
  void record_partition_cleared(const std::string& partition_id) noexcept;

  // The changes since request.cursor that pass its filter, at most
  // request.max_changes (request.wait is the caller's). Starts the
  // partition's log when it has none. Checks the request: kInvalidArgument
  // naming the parameter and the value.
  WatchBatch read(const WatchRequest& request, Clock::time_point now);

  // Every log goes (a checkpoint was loaded): every watcher resyncs.
  void forget_all() noexcept { logs_.clear(); }

 private:
  struct Log {
    std::deque<Logged> entries;  // ascending sequence, at most capacity_
    uint64_t oldest_cursor = 0;  // the smallest cursor it answers
    Clock::time_point last_read;
    size_t bytes = 0;  // of the entries' keys and tags, at most kWatchLogBytes
  };
  // A log for a partition not watched yet: idle logs go first; past
  // kMaxWatchedPartitions, kInvalidArgument naming the limit.
  Log& start_log(const std::string& partition_id, Clock::time_point now);
  // Out of memory: what the log held is gone; older cursors resync.
  void lose(Log& log) noexcept;

  size_t capacity_;
  uint64_t next_sequence_ = 1;  // cursors are never 0: 0 asks to start
  std::map<std::string, Log> logs_;
};

// Throws kInvalidArgument naming the bad parameter of a watch request
// (partition_id, key_prefix, tag_field, max_changes, wait); checks no cursor.
void check_watch_request(const WatchRequest& request);

}  // namespace seqflow::core
