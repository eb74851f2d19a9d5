#include "core/task_queue.h"

namespace seqflow::core {

void TaskQueue::reserve_slots(size_t slots) {
  if (next_.size() >= slots) return;
  next_.resize(slots, kNoSlot);
  prev_.resize(slots, kNoSlot);
  consumed_bits_.resize((slots + 63) / 64, 0);
}

bool TaskQueue::is_consumed(uint32_t slot) const {
  return ((consumed_bits_[slot / 64] >> (slot % 64)) & 1U) != 0;
}

void TaskQueue::append(uint32_t slot) {
  reserve_slots(static_cast<size_t>(slot) + 1);
  consumed_bits_[slot / 64] &= ~(uint64_t{1} << (slot % 64));
  prev_[slot] = tail_;
  next_[slot] = kNoSlot;
  if (tail_ == kNoSlot) {
    head_ = slot;
  } else {
    next_[tail_] = slot;
  }
  tail_ = slot;
  ++unconsumed_;
}

void TaskQueue::unlink(uint32_t slot) {
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
}

void TaskQueue::consume(uint32_t slot) {
  unlink(slot);
  consumed_bits_[slot / 64] |= uint64_t{1} << (slot % 64);
  --unconsumed_;
  ++consumed_;
}

void TaskQueue::remove(uint32_t slot) {
  if (is_consumed(slot)) {
    consumed_bits_[slot / 64] &= ~(uint64_t{1} << (slot % 64));
    --consumed_;
  } else {
    unlink(slot);
    --unconsumed_;
  }
}

}  // namespace seqflow::core
