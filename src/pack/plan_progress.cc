#include "pack/plan_progress.h"

#include <algorithm>
#include <limits>

namespace seqflow::pack::detail {

PhaseProgress::PhaseProgress(const PlanProgressCallback& callback, PlanPhase phase, int64_t total)
    : callback_(callback), progress_{phase, 0, total}, stride_(total / kProgressUpdates + 1) {
  report();
}

void PhaseProgress::advance(int64_t count) {
  if (!callback_) return;
  progress_.done += count;
  if (progress_.done >= next_report_) report();
}

void PhaseProgress::report() {
  if (!callback_) return;
  callback_(progress_);
  // stride_ > total / kProgressUpdates: fewer than kProgressUpdates crossings
  // fit below total, and the end is always reported.
  next_report_ = progress_.done >= progress_.total
                     ? std::numeric_limits<int64_t>::max()
                     : std::min(progress_.total, (progress_.done / stride_ + 1) * stride_);
}

}  // namespace seqflow::pack::detail
