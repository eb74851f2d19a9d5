// Changes pushed, not polled: ControlPlane::watch answers the changes of a
// partition's samples (inserted, produced, tagged, cleared) since a cursor,
// from a bounded log the controller keeps only while someone watches the
// partition. A watch call costs the changes since its cursor, never the
// partition's idle keys; kv_list stays the way to see everything.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "seqflow/value.h"

namespace seqflow {

// What happened to a sample. A closed set: a watcher switches over it.
enum class ChangeKind {
  kInserted,          // a new sample (insert, or a new key of kv_put)
  kProduced,          // fields of it were produced (a put)
  kTagged,            // its tag (custom_meta) was set without a put
  kCleared,           // it was released (clear, kv_clear, reclaim, a replay pass)
  kPartitionCleared,  // every sample of the partition was released at once
  // Not a sample's change: the watcher may have missed changes
  // (WatchBatch::resync) and should re-read the partition (kv_list).
  kResync,
};
const char* change_kind_name(ChangeKind kind);  // "inserted", "produced", ..., "resync"

struct Change {
  ChangeKind kind = ChangeKind::kInserted;
  int64_t global_index = -1;       // -1 for kPartitionCleared
  std::optional<std::string> key;  // the sample's key; none for keyless samples
  // The sample's whole tag after the change, where the change set one
  // (kInserted with a tag, kProduced with custom_meta, kTagged).
  std::optional<Value> tag;
  bool operator==(const Change&) const = default;
};

// Which changes a watcher is told of; evaluated in the controller.
struct WatchFilter {
  // Non-empty: only changes of samples whose key starts with it (keyless
  // samples never match). kPartitionCleared always matches.
  std::string key_prefix;
  // Non-empty: only changes that set a tag holding this field (say
  // "status"). kPartitionCleared always matches.
  std::string tag_field;
  bool operator==(const WatchFilter&) const = default;
};

// How many changes a partition's log keeps: a watcher further behind is
// told to resync (WatchBatch::resync), never silently skipped.
inline constexpr size_t kWatchLogCapacity = 65536;
// And at most this many bytes of keys and tags per log (older changes go
// first, their watchers resync), and this many watched partitions: a peer
// that watches made-up partitions is refused past it.
inline constexpr size_t kWatchLogBytes = size_t{64} << 20;
inline constexpr size_t kMaxWatchedPartitions = 4096;
// The most changes one watch call may ask for.
inline constexpr int64_t kMaxWatchChanges = 65536;
// The longest one watch call may wait for a change.
inline constexpr std::chrono::milliseconds kMaxWatchWait = std::chrono::minutes(10);
// A partition nobody watched (no watch call) for this long stops recording:
// its log goes, and a watcher that comes back later is told to resync.
inline constexpr std::chrono::milliseconds kWatchIdleLimit = std::chrono::minutes(30);

struct WatchRequest {
  std::string partition_id;
  WatchFilter filter;
  // 0: start watching now (the answer holds no change, only the cursor to
  // pass next). Otherwise a cursor an earlier answer gave.
  uint64_t cursor = 0;
  int64_t max_changes = 1024;  // 1..kMaxWatchChanges
  // How long to wait when no change is there yet (0: answer at once).
  std::chrono::milliseconds wait{0};
};

struct WatchBatch {
  std::vector<Change> changes;  // oldest first, at most max_changes
  uint64_t cursor = 0;          // pass it to the next call
  // The log no longer holds the asked cursor (the watcher fell more than
  // kWatchLogCapacity changes behind, the log went idle, or a checkpoint
  // was loaded): changes may have been missed. Re-read the partition
  // (kv_list) and go on from `cursor`. `changes` then holds one kResync
  // change and nothing else, so a consumer of changes alone sees it too.
  bool resync = false;
  bool operator==(const WatchBatch&) const = default;
};

}  // namespace seqflow
