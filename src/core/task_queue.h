// One task's view of a partition: which samples it consumed, and the samples
// it has not consumed yet in arrival order, so that finding ready samples
// never walks the consumed history.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace seqflow::core {

inline constexpr uint32_t kNoSlot = UINT32_MAX;

class TaskQueue {
 public:
  // Slots must be below `slots` before they are appended.
  void reserve_slots(size_t slots);
  // A new live sample, unconsumed, the newest.
  void append(uint32_t slot);
  // The sample left the partition.
  void remove(uint32_t slot);
  // Marks consumed and unlinks; the slot must be unconsumed.
  void consume(uint32_t slot);
  // Consumed by this task? (Only for live samples.)
  bool is_consumed(uint32_t slot) const;

  // Unconsumed samples, oldest first: head(), then next(slot) until kNoSlot.
  uint32_t head() const { return head_; }
  uint32_t next(uint32_t slot) const { return next_[slot]; }
  size_t unconsumed() const { return unconsumed_; }
  size_t consumed() const { return consumed_; }

 private:
  void unlink(uint32_t slot);

  // An intrusive doubly linked list over slots: O(1) unlink on consume and
  // 8 bytes per sample, where a std::set would cost ~40.
  std::vector<uint32_t> next_;
  std::vector<uint32_t> prev_;
  std::vector<uint64_t> consumed_bits_;
  uint32_t head_ = kNoSlot;
  uint32_t tail_ = kNoSlot;
  size_t unconsumed_ = 0;
  size_t consumed_ = 0;
};

}  // namespace seqflow::core
