// How many units each part may still take under a cardinality rule.
#pragma once

#include <cstdint>
#include <vector>

#include "seqflow/balance.h"

namespace seqflow::balance::detail {

// Counts per part under kEqual / kBalanced: every part holds `floor` units,
// and `extra` of them hold one more. kFree has no limit.
class Capacity {
 public:
  Capacity(Cardinality cardinality, int64_t units, int64_t k)
      : free_(cardinality == Cardinality::kFree),
        floor_(units / k),
        extra_(cardinality == Cardinality::kFree ? 0 : units % k) {}

  // A part holding `count` units can take one more.
  bool can_add(int64_t count) const {
    if (free_) return true;
    if (count < floor_) return true;
    return count == floor_ && extra_used_ < extra_;
  }
  void added(int64_t new_count) {
    if (!free_ && new_count == floor_ + 1) ++extra_used_;
  }
  // Moving one unit from a part of `from_count` to one of `to_count` keeps the rule.
  bool can_move(int64_t from_count, int64_t to_count) const { return free_ || from_count > to_count; }
  bool allows_moves() const { return free_ || extra_ > 0; }

 private:
  bool free_;
  int64_t floor_;
  int64_t extra_;
  int64_t extra_used_ = 0;
};

}  // namespace seqflow::balance::detail
