// The partition of each sample of a batch. A batch nearly always comes from
// one partition, so each run of equal names is stored once: a fetch of 256
// samples does not copy the name 256 times, and the wire carries the runs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace seqflow {

class PartitionIdList {
 public:
  PartitionIdList() = default;
  PartitionIdList(size_t count, const std::string& name) { append(count, name); }
  explicit PartitionIdList(const std::vector<std::string>& names) {
    for (const std::string& name : names) append(1, name);
  }

  size_t size() const { return ends_.empty() ? 0 : ends_.back(); }
  bool empty() const { return size() == 0; }
  // The partition of sample i (i < size()); O(log runs).
  const std::string& operator[](size_t i) const;

  void push_back(const std::string& name) { append(1, name); }
  void append(size_t count, const std::string& name);

  // Runs of equal names: samples [end of run r-1, run_end(r)) are in run_name(r).
  size_t run_count() const { return names_.size(); }
  const std::string& run_name(size_t r) const { return names_[r]; }
  size_t run_end(size_t r) const { return ends_[r]; }

  std::vector<std::string> to_vector() const;
  bool operator==(const PartitionIdList& other) const = default;

 private:
  std::vector<std::string> names_;
  std::vector<size_t> ends_;
};

}  // namespace seqflow
