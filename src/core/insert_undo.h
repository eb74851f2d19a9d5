// Undoes an insert that failed part way (out of memory while building its
// answer, say): the samples it added go, and the partition too if the
// insert made it, so a failed insert leaves the state as it found it.
#pragma once

#include <string>
#include <utility>

#include "core/control_data.h"

namespace seqflow::core {

class InsertUndo {
 public:
  // Before the partition is looked up or made.
  InsertUndo(ControlData& data, std::string partition_id)
      : data_(data), partition_id_(std::move(partition_id)), made_(data.find(partition_id_) == nullptr) {}
  ~InsertUndo() {
    if (committed_) return;
    PartitionState* partition = data_.find(partition_id_);
    if (partition == nullptr) return;
    // Nothing here allocates (a destructor must not fail): add_samples made
    // room to free its slots, and a partition the insert made is empty now.
    data_.discard_samples(*partition, added_.slots);
    if (made_) data_.erase(partition_id_);
  }
  InsertUndo(const InsertUndo&) = delete;
  InsertUndo& operator=(const InsertUndo&) = delete;

  bool made_partition() const { return made_; }
  // The samples to remove unless commit() comes first.
  const NewSamples& added(NewSamples samples) {
    added_ = std::move(samples);
    return added_;
  }
  void commit() { committed_ = true; }

 private:
  ControlData& data_;
  std::string partition_id_;
  bool made_;
  bool committed_ = false;
  NewSamples added_;
};

}  // namespace seqflow::core
