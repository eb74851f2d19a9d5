#include "core/task_queue.h"

namespace seqflow::core {

void TaskQueue::reserve_slots(size_t slots) {
  unconsumed_.reserve_slots(slots);
  if (consumed_bits_.size() * 64 < slots) consumed_bits_.resize((slots + 63) / 64, 0);
}

bool TaskQueue::is_consumed(uint32_t slot) const { return ((consumed_bits_[slot / 64] >> (slot % 64)) & 1U) != 0; }

void TaskQueue::set_consumed(uint32_t slot, bool consumed) {
  const uint64_t bit = uint64_t{1} << (slot % 64);
  if (consumed) {
    consumed_bits_[slot / 64] |= bit;
  } else {
    consumed_bits_[slot / 64] &= ~bit;
  }
}

void TaskQueue::append(uint32_t slot) {
  reserve_slots(static_cast<size_t>(slot) + 1);
  set_consumed(slot, false);
  unconsumed_.push_back(slot);
}

void TaskQueue::consume(uint32_t slot) {
  unconsumed_.unlink(slot);
  set_consumed(slot, true);
}

void TaskQueue::give_back(uint32_t slot, uint32_t next_unconsumed) {
  set_consumed(slot, false);
  unconsumed_.insert_before(slot, next_unconsumed);
}

void TaskQueue::remove(uint32_t slot) {
  if (is_consumed(slot)) {
    set_consumed(slot, false);
  } else {
    unconsumed_.unlink(slot);
  }
}

}  // namespace seqflow::core
