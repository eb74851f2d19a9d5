// One task's view of a partition: which samples it consumed, and the samples
// it has not consumed yet in arrival order, so that finding ready samples
// never walks the consumed history.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/slot_list.h"

namespace seqflow::core {

class TaskQueue {
 public:
  void reserve_slots(size_t slots);
  // A new live sample, unconsumed, the newest.
  void append(uint32_t slot);
  // The sample left the partition.
  void remove(uint32_t slot);
  // Marks consumed and unlinks; the slot must be unconsumed.
  void consume(uint32_t slot);
  // Unconsumed again, back in arrival order: before `next_unconsumed`, the
  // first unconsumed sample that arrived after it (kNoSlot: none did). The
  // slot must be consumed.
  void give_back(uint32_t slot, uint32_t next_unconsumed);
  // Consumed by this task? (Only for live samples.)
  bool is_consumed(uint32_t slot) const;

  // Unconsumed samples, oldest first: head(), then next(slot) until kNoSlot.
  uint32_t head() const { return unconsumed_.head(); }
  uint32_t next(uint32_t slot) const { return unconsumed_.next(slot); }
  size_t unconsumed() const { return unconsumed_.size(); }

 private:
  void set_consumed(uint32_t slot, bool consumed);

  SlotList unconsumed_;
  std::vector<uint64_t> consumed_bits_;
};

}  // namespace seqflow::core
