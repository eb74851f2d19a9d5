// The data plane: a column store keyed by (global index, field).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "seqflow/tensor.h"

namespace seqflow {

struct StorageOptions {
  uint64_t max_bytes = 0;    // 0: unlimited
  uint64_t max_samples = 0;  // 0: unlimited
};

struct StorageStats {
  uint64_t samples = 0;  // global indexes holding at least one field
  uint64_t bytes = 0;    // bytes of the values held (a shared buffer counts
                         // only the slices still referenced)
};

// The data plane's calls, served by a StorageUnit in this process or by
// storage services (remote mode, sample gi on unit gi % N). Thread-safe.
// Writes are all-or-nothing: a put that fails (capacity, bad column) changes
// nothing.
class DataPlane {
 public:
  virtual ~DataPlane() = default;

  // Stores columns[c].sample(i) under (global_indexes[i], columns[c].field);
  // every column must hold global_indexes.size() samples. Overwrites values
  // already stored. Throws kInvalidArgument on bad columns or duplicate
  // indexes, and when full (naming the limit, the requested and the free
  // amount).
  virtual void put(std::span<const int64_t> global_indexes, const std::vector<Column>& columns) = 0;

  // Views of the requested fields, one row per global index, in the given
  // order: result[i][f] is fields[f] of global_indexes[i]. The views share
  // the put's buffer (no copy) and keep it alive after clear(). A missing
  // (index, field) throws kNotFound naming both.
  virtual std::vector<std::vector<SampleView>> get(std::span<const int64_t> global_indexes,
                                           std::span<const std::string> fields) const = 0;

  // Drops every field of these indexes; unknown indexes are ignored.
  virtual void clear(std::span<const int64_t> global_indexes) = 0;
  virtual void clear_all() = 0;

  virtual StorageStats stats() const = 0;

  // Checkpoint: every stored value, in one file (atomic: written to a
  // temporary name, then renamed). load replaces the content, or throws and
  // leaves it unchanged.
  virtual void save(const std::string& path) const = 0;
  virtual void load(const std::string& path) = 0;
};

// The data plane in this process: a column store behind one reader-writer lock.
class StorageUnit final : public DataPlane {
 public:
  explicit StorageUnit(StorageOptions options = {});

  void put(std::span<const int64_t> global_indexes, const std::vector<Column>& columns) override;
  std::vector<std::vector<SampleView>> get(std::span<const int64_t> global_indexes,
                                           std::span<const std::string> fields) const override;
  void clear(std::span<const int64_t> global_indexes) override;
  void clear_all() override;
  StorageStats stats() const override;
  void save(const std::string& path) const override;
  void load(const std::string& path) override;

 private:
  // A phase-fair reader-writer lock: a waiting writer holds back new
  // readers, and a writer's unlock admits every reader that waited for it
  // before the next writer. std::shared_mutex (glibc's reader-first rwlock)
  // starves puts under a stream of gets; a writer-first one starves gets.
  // Works with std::unique_lock and std::shared_lock.
  class FairSharedMutex {
   public:
    void lock();
    void unlock();
    void lock_shared();
    void unlock_shared();

   private:
    std::mutex mutex_;
    std::condition_variable readers_cv_;
    std::condition_variable writers_cv_;
    bool writing_ = false;
    size_t active_readers_ = 0;
    size_t waiting_readers_ = 0;
    size_t admitted_readers_ = 0;  // woken by the last unlock, not yet in
    size_t waiting_writers_ = 0;
    uint64_t writes_ = 0;          // completed writes: a reader's phase
  };

  StorageOptions options_;
  mutable FairSharedMutex mutex_;
  std::unordered_map<int64_t, std::map<std::string, SampleView>> values_;
  StorageStats stats_;
};

}  // namespace seqflow
