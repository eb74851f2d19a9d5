// An intrusive doubly linked list over slots, in insertion order: O(1)
// append and unlink at 8 bytes per slot, where a std::set would cost ~40.
// Partitions keep their live samples in one; tasks their unconsumed samples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace seqflow::core {

inline constexpr uint32_t kNoSlot = UINT32_MAX;

class SlotList {
 public:
  void reserve_slots(size_t slots);
  void push_back(uint32_t slot);  // grows to fit the slot
  void unlink(uint32_t slot);     // the slot must be in the list
  // Links `slot` (not in the list) before `before` (in it), or last when
  // `before` is kNoSlot.
  void insert_before(uint32_t slot, uint32_t before);

  // head(), then next(slot) until kNoSlot.
  uint32_t head() const { return head_; }
  uint32_t next(uint32_t slot) const { return next_[slot]; }
  size_t size() const { return size_; }

 private:
  std::vector<uint32_t> next_;
  std::vector<uint32_t> prev_;
  uint32_t head_ = kNoSlot;
  uint32_t tail_ = kNoSlot;
  size_t size_ = 0;
};

}  // namespace seqflow::core
