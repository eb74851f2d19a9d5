#include "core/change_log.h"

#include <algorithm>
#include <new>

#include "core/custom_meta.h"
#include "core/name_rule.h"
#include "seqflow/error.h"

namespace seqflow {

const char* change_kind_name(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::kInserted:
      return "inserted";
    case ChangeKind::kProduced:
      return "produced";
    case ChangeKind::kTagged:
      return "tagged";
    case ChangeKind::kCleared:
      return "cleared";
    case ChangeKind::kPartitionCleared:
      return "partition_cleared";
    case ChangeKind::kResync:
      break;
  }
  return "resync";
}

namespace core {
namespace {

// The change as the watcher gets it, if it passes the filter.
std::optional<Change> filtered(const ChangeLogs::Logged& logged, const WatchFilter& filter) {
  const bool whole_partition = logged.kind == ChangeKind::kPartitionCleared;  // every watcher hears of it
  if (!whole_partition && !filter.key_prefix.empty() && (!logged.key || !logged.key->starts_with(filter.key_prefix))) {
    return std::nullopt;
  }
  Change change{logged.kind, logged.global_index, logged.key, std::nullopt};
  if (logged.tag) change.tag = decode_meta(*logged.tag);
  if (!whole_partition && !filter.tag_field.empty() && (!change.tag || !change.tag->contains(filter.tag_field))) {
    return std::nullopt;
  }
  return change;
}

void mark_resync(WatchBatch& batch) {
  batch.resync = true;
  batch.changes.push_back(Change{ChangeKind::kResync, -1, std::nullopt, std::nullopt});
}

}  // namespace

void check_watch_request(const WatchRequest& request) {
  check_name(request.partition_id, "partition_id");
  if (!request.filter.key_prefix.empty()) check_name(request.filter.key_prefix, "key_prefix");
  if (!request.filter.tag_field.empty()) check_name(request.filter.tag_field, "tag_field");
  if (request.max_changes < 1 || request.max_changes > kMaxWatchChanges) {
    throw_invalid("max_changes = " + std::to_string(request.max_changes) + " must be in 1.." +
                  std::to_string(kMaxWatchChanges));
  }
  if (request.wait.count() < 0 || request.wait > kMaxWatchWait) {
    throw_invalid("wait = " + std::to_string(request.wait.count()) + " ms must be in 0.." +
                  std::to_string(kMaxWatchWait.count()) + " ms");
  }
}

namespace {

size_t logged_bytes(const ChangeLogs::Logged& logged) {
  return sizeof(logged) + (logged.key ? logged.key->size() : 0) + (logged.tag ? logged.tag->size() : 0);
}

}  // namespace

bool ChangeLogs::watched(const std::string& partition_id, Clock::time_point now) {
  if (logs_.empty()) return false;
  const auto found = logs_.find(partition_id);
  if (found == logs_.end()) return false;
  if (now - found->second.last_read > kWatchIdleLimit) {
    logs_.erase(found);
    return false;
  }
  return true;
}

std::vector<ChangeLogs::Logged> ChangeLogs::describe(const std::string& partition_id, const PartitionState& partition,
                                                     ChangeKind kind, std::span<const uint32_t> slots, bool tagged,
                                                     Clock::time_point now) {
  std::vector<Logged> changes;
  if (!watched(partition_id, now)) return changes;
  changes.reserve(slots.size());
  for (const uint32_t slot : slots) {
    Logged& logged = changes.emplace_back();
    logged.kind = kind;
    logged.global_index = partition.global_index(slot);
    if (const std::string* key = partition.key_of(slot)) logged.key = *key;
    if (tagged && !partition.meta_bytes(slot).empty()) logged.tag = partition.meta_bytes(slot);
  }
  return changes;
}

void ChangeLogs::append(const std::string& partition_id, std::vector<Logged> changes) noexcept {
  if (changes.empty()) return;
  const auto found = logs_.find(partition_id);
  if (found == logs_.end()) return;
  Log& log = found->second;
  try {
    for (Logged& logged : changes) {
      logged.sequence = next_sequence_++;
      log.bytes += logged_bytes(logged);
      log.entries.push_back(std::move(logged));
      while (log.entries.size() > capacity_ || (log.bytes > kWatchLogBytes && log.entries.size() > 1)) {
        log.bytes -= logged_bytes(log.entries.front());
        log.oldest_cursor = log.entries.front().sequence + 1;
        log.entries.pop_front();
      }
    }
  } catch (const std::bad_alloc&) {
    lose(log);
  }
}

void ChangeLogs::record(const std::string& partition_id, const PartitionState& partition, ChangeKind kind,
                        std::span<const uint32_t> slots, bool tagged) noexcept {
  if (logs_.empty()) return;  // nothing watched: no cost
  try {
    append(partition_id, describe(partition_id, partition, kind, slots, tagged, Clock::now()));
  } catch (const std::exception&) {
    // A tag too large to copy: the watchers resync rather than miss it.
    if (auto found = logs_.find(partition_id); found != logs_.end()) lose(found->second);
  }
}

void ChangeLogs::record_partition_cleared(const std::string& partition_id) noexcept {
  if (!watched(partition_id, Clock::now())) return;
  try {
    std::vector<Logged> change(1);
    change[0].kind = ChangeKind::kPartitionCleared;
    append(partition_id, std::move(change));
  } catch (const std::bad_alloc&) {
    lose(logs_.at(partition_id));
  }
}

ChangeLogs::Log& ChangeLogs::start_log(const std::string& partition_id, Clock::time_point now) {
  if (logs_.size() >= kMaxWatchedPartitions) {
    std::erase_if(logs_, [&](const auto& entry) { return now - entry.second.last_read > kWatchIdleLimit; });
  }
  if (logs_.size() >= kMaxWatchedPartitions) {
    throw_invalid("partition_id '" + partition_id + "': " + std::to_string(logs_.size()) +
                  " partitions are watched, at most " + std::to_string(kMaxWatchedPartitions));
  }
  return logs_.emplace(partition_id, Log{{}, next_sequence_, now, 0}).first->second;
}

void ChangeLogs::lose(Log& log) noexcept {
  log.entries.clear();
  log.bytes = 0;
  log.oldest_cursor = ++next_sequence_;
}

WatchBatch ChangeLogs::read(const WatchRequest& request, Clock::time_point now) {
  check_watch_request(request);
  if (request.cursor > next_sequence_) {
    throw_invalid("cursor = " + std::to_string(request.cursor) + " was never handed out (0 starts a watch)");
  }
  WatchBatch batch;
  auto found = logs_.find(request.partition_id);
  if (found != logs_.end() && now - found->second.last_read > kWatchIdleLimit) {
    logs_.erase(found);
    found = logs_.end();
  }
  if (found == logs_.end()) {
    start_log(request.partition_id, now);
    batch.cursor = next_sequence_;
    if (request.cursor != 0) mark_resync(batch);
    return batch;
  }
  Log& log = found->second;
  log.last_read = now;
  if (request.cursor == 0) {
    batch.cursor = next_sequence_;
    return batch;
  }
  if (request.cursor < log.oldest_cursor) {
    batch.cursor = next_sequence_;
    mark_resync(batch);
    return batch;
  }
  auto at = std::lower_bound(log.entries.begin(), log.entries.end(), request.cursor,
                             [](const Logged& logged, uint64_t cursor) { return logged.sequence < cursor; });
  batch.cursor = next_sequence_;
  for (; at != log.entries.end(); ++at) {
    if (batch.changes.size() == static_cast<size_t>(request.max_changes)) {
      batch.cursor = at->sequence;
      break;
    }
    if (auto change = filtered(*at, request.filter)) batch.changes.push_back(std::move(*change));
  }
  return batch;
}

}  // namespace core
}  // namespace seqflow
