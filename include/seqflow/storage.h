// The data plane: a column store keyed by (global index, field).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <shared_mutex>
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

// Thread-safe. Writes are all-or-nothing: a put that fails (capacity, bad
// column) changes nothing.
class StorageUnit {
 public:
  explicit StorageUnit(StorageOptions options = {});

  // Stores columns[c].sample(i) under (global_indexes[i], columns[c].field);
  // every column must hold global_indexes.size() samples. Overwrites values
  // already stored. Throws kInvalidArgument on bad columns or duplicate
  // indexes, and when full (naming the limit, the requested and the free
  // amount).
  void put(std::span<const int64_t> global_indexes, const std::vector<Column>& columns);

  // Views of the requested fields, one per global index, in the given order.
  // A missing (index, field) throws kNotFound naming both.
  std::vector<std::vector<SampleView>> get(std::span<const int64_t> global_indexes,
                                           std::span<const std::string> fields) const;

  // Drops every field of these indexes; unknown indexes are ignored.
  void clear(std::span<const int64_t> global_indexes);
  void clear_all();

  StorageStats stats() const;

  // Checkpoint: every stored value, in one file (atomic: written to a
  // temporary name, then renamed). load replaces the content, or throws and
  // leaves it unchanged.
  void save(const std::string& path) const;
  void load(const std::string& path);

 private:
  StorageOptions options_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<int64_t, std::map<std::string, SampleView>> values_;
  StorageStats stats_;
};

}  // namespace seqflow
