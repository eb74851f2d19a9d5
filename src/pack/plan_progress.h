// Reports one phase of plan() to Options::progress at a bounded rate: the
// phase's start, each crossing of another 1/kProgressUpdates of its total,
// and its end.
#pragma once

#include <cstdint>

#include "seqflow/pack.h"

namespace seqflow::pack::detail {

class PhaseProgress {
 public:
  // Reports done 0 (when `callback` is set).
  PhaseProgress(const PlanProgressCallback& callback, PlanPhase phase, int64_t total);
  // `count` more samples are through the phase.
  void advance(int64_t count);

 private:
  void report();

  const PlanProgressCallback& callback_;
  PlanProgress progress_;
  const int64_t stride_;     // reports come at multiples of it
  int64_t next_report_ = 0;  // the smallest done worth reporting
};

}  // namespace seqflow::pack::detail
