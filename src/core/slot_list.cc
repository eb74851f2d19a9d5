#include "core/slot_list.h"

namespace seqflow::core {

void SlotList::reserve_slots(size_t slots) {
  if (next_.size() >= slots) return;
  next_.resize(slots, kNoSlot);
  prev_.resize(slots, kNoSlot);
}

void SlotList::push_back(uint32_t slot) {
  reserve_slots(static_cast<size_t>(slot) + 1);
  prev_[slot] = tail_;
  next_[slot] = kNoSlot;
  if (tail_ == kNoSlot) {
    head_ = slot;
  } else {
    next_[tail_] = slot;
  }
  tail_ = slot;
  ++size_;
}

void SlotList::insert_before(uint32_t slot, uint32_t before) {
  if (before == kNoSlot) {
    push_back(slot);
    return;
  }
  reserve_slots(static_cast<size_t>(slot) + 1);
  const uint32_t after_of = prev_[before];
  prev_[slot] = after_of;
  next_[slot] = before;
  prev_[before] = slot;
  if (after_of == kNoSlot) {
    head_ = slot;
  } else {
    next_[after_of] = slot;
  }
  ++size_;
}

void SlotList::unlink(uint32_t slot) {
  const uint32_t before = prev_[slot];
  const uint32_t after = next_[slot];
  if (before == kNoSlot) {
    head_ = after;
  } else {
    next_[before] = after;
  }
  if (after == kNoSlot) {
    tail_ = before;
  } else {
    prev_[after] = before;
  }
  prev_[slot] = next_[slot] = kNoSlot;
  --size_;
}

}  // namespace seqflow::core
