// The column store: (global index, field) -> view of a put's buffer.
#include "seqflow/storage.h"

#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <unordered_set>

#include "seqflow/error.h"
#include "storage/checkpoint.h"

namespace seqflow {
namespace {

using Fields = std::map<std::string, SampleView>;
using Values = std::unordered_map<int64_t, Fields>;

uint64_t bytes_of(const Fields& fields) {
  uint64_t bytes = 0;
  for (const auto& [field, view] : fields) bytes += view.nbytes;
  return bytes;
}

// Throws when `requested` more units do not fit under `limit` (0: unlimited).
void check_room(std::string_view limit_name, uint64_t limit, uint64_t used, uint64_t requested,
                std::string_view unit, std::string_view requester) {
  if (limit == 0) return;
  const uint64_t free = used < limit ? limit - used : 0;
  if (requested <= free) return;
  throw_invalid("storage full: " + std::string(limit_name) + " is " + std::to_string(limit) + "; " +
                std::string(requester) + " needs " + std::to_string(requested) + " " +
                std::string(unit) + ", " + std::to_string(free) + " are free");
}

void check_indexes(std::span<const int64_t> global_indexes) {
  std::unordered_map<int64_t, size_t> position;
  position.reserve(global_indexes.size());
  for (size_t i = 0; i < global_indexes.size(); ++i) {
    const int64_t gi = global_indexes[i];
    if (gi < 0) {
      throw_invalid("global_indexes[" + std::to_string(i) + "] is negative: " + std::to_string(gi));
    }
    auto [it, inserted] = position.emplace(gi, i);
    if (!inserted) {
      throw_invalid("global index " + std::to_string(gi) + " appears twice in one put (positions " +
                    std::to_string(it->second) + " and " + std::to_string(i) + ")");
    }
  }
}

void check_columns(size_t samples, const std::vector<Column>& columns) {
  std::unordered_set<std::string_view> fields;
  for (const Column& column : columns) {
    column.validate();
    if (column.sample_count() != samples) {
      throw_invalid("column \"" + column.field + "\" holds " +
                    std::to_string(column.sample_count()) + " samples; the put has " +
                    std::to_string(samples) + " global indexes");
    }
    if (!fields.insert(column.field).second) {
      throw_invalid("column \"" + column.field + "\" appears twice in one put");
    }
  }
}

}  // namespace

StorageUnit::StorageUnit(StorageOptions options) : options_(options) {}

void StorageUnit::put(std::span<const int64_t> global_indexes, const std::vector<Column>& columns) {
  check_indexes(global_indexes);
  check_columns(global_indexes.size(), columns);
  if (columns.empty() || global_indexes.empty()) return;

  // Every allocation happens here, before the lock: under it, values only
  // move between node-based maps, which cannot throw, so a put lands whole.
  Values staged;
  staged.reserve(global_indexes.size());
  uint64_t added = 0;
  for (size_t i = 0; i < global_indexes.size(); ++i) {
    Fields& fields = staged[global_indexes[i]];
    for (const Column& column : columns) {
      SampleView view = column.sample(i);
      added += view.nbytes;
      fields.emplace(column.field, std::move(view));
    }
  }

  std::unique_lock lock(mutex_);
  uint64_t replaced = 0;
  uint64_t fresh = 0;
  for (const auto& [gi, fields] : staged) {
    auto stored = values_.find(gi);
    if (stored == values_.end()) {
      ++fresh;
      continue;
    }
    for (const auto& [field, view] : fields) {
      auto slot = stored->second.find(field);
      if (slot != stored->second.end()) replaced += slot->second.nbytes;
    }
  }
  // Overwritten bytes are released by this put, so they count as free.
  check_room("max_bytes", options_.max_bytes, stats_.bytes - replaced, added, "bytes", "the put");
  check_room("max_samples", options_.max_samples, values_.size(), fresh, "new samples", "the put");
  values_.reserve(values_.size() + fresh);  // the last step that may throw

  for (auto it = staged.begin(); it != staged.end();) {
    auto stored = values_.find(it->first);
    if (stored == values_.end()) {
      values_.insert(staged.extract(it++));
      continue;
    }
    Fields& fields = it->second;
    for (auto field = fields.begin(); field != fields.end();) {
      auto slot = stored->second.find(field->first);
      if (slot == stored->second.end()) {
        stored->second.insert(fields.extract(field++));
      } else {
        std::swap(slot->second, field->second);  // the old view leaves with `staged`
        ++field;
      }
    }
    ++it;
  }
  stats_.bytes = stats_.bytes - replaced + added;
  stats_.samples = values_.size();
  lock.unlock();
  // `staged` now holds the overwritten views; their buffers may be freed here, unlocked.
}

std::vector<std::vector<SampleView>> StorageUnit::get(std::span<const int64_t> global_indexes,
                                                      std::span<const std::string> fields) const {
  std::vector<std::vector<SampleView>> out(global_indexes.size());
  std::shared_lock lock(mutex_);
  for (size_t i = 0; i < global_indexes.size(); ++i) {
    const int64_t gi = global_indexes[i];
    auto stored = values_.find(gi);
    out[i].reserve(fields.size());
    for (const std::string& field : fields) {
      if (stored == values_.end()) {
        throw Error(ErrorCode::kNotFound, "storage holds no global index " + std::to_string(gi) +
                                              " (requested field \"" + field + "\")");
      }
      auto slot = stored->second.find(field);
      if (slot == stored->second.end()) {
        throw Error(ErrorCode::kNotFound, "storage holds no field \"" + field +
                                              "\" for global index " + std::to_string(gi));
      }
      out[i].push_back(slot->second);
    }
  }
  return out;
}

void StorageUnit::clear(std::span<const int64_t> global_indexes) {
  std::vector<Values::node_type> dropped;
  dropped.reserve(global_indexes.size());
  std::unique_lock lock(mutex_);
  for (int64_t gi : global_indexes) {
    auto stored = values_.find(gi);
    if (stored == values_.end()) continue;
    stats_.bytes -= bytes_of(stored->second);
    dropped.push_back(values_.extract(stored));
  }
  stats_.samples = values_.size();
  lock.unlock();
  // `dropped` releases the buffers here, unlocked.
}

void StorageUnit::clear_all() {
  Values dropped;
  std::unique_lock lock(mutex_);
  dropped.swap(values_);
  stats_ = {};
}

StorageStats StorageUnit::stats() const {
  std::shared_lock lock(mutex_);
  return stats_;
}

void StorageUnit::save(const std::string& path) const {
  // Views keep their buffers alive, so the file is written without the lock.
  std::vector<StoredValue> snapshot;
  {
    std::shared_lock lock(mutex_);
    for (const auto& [gi, fields] : values_) {
      for (const auto& [field, view] : fields) snapshot.push_back({gi, field, view});
    }
  }
  // Sorted so that the same content gives the same file.
  std::sort(snapshot.begin(), snapshot.end(), [](const StoredValue& a, const StoredValue& b) {
    return a.global_index != b.global_index ? a.global_index < b.global_index : a.field < b.field;
  });
  write_checkpoint(path, snapshot);
}

void StorageUnit::load(const std::string& path) {
  std::vector<StoredValue> records = read_checkpoint(path);
  Values loaded;
  StorageStats stats;
  for (StoredValue& record : records) {
    stats.bytes += record.view.nbytes;
    if (!loaded[record.global_index].emplace(record.field, std::move(record.view)).second) {
      throw_invalid("checkpoint \"" + path + "\" is corrupt: field \"" + record.field +
                    "\" of global index " + std::to_string(record.global_index) + " appears twice");
    }
  }
  stats.samples = loaded.size();
  // The checkpoint replaces the content, so the whole limit is free.
  const std::string requester = "checkpoint \"" + path + "\"";
  check_room("max_bytes", options_.max_bytes, 0, stats.bytes, "bytes", requester);
  check_room("max_samples", options_.max_samples, 0, stats.samples, "samples", requester);

  std::unique_lock lock(mutex_);
  values_.swap(loaded);
  stats_ = stats;
  lock.unlock();
  // `loaded` now holds the old content; it is released here, unlocked.
}

}  // namespace seqflow
