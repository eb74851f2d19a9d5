// Padding and statistics of a pack plan, shared by the planner and the
// baseline, internal to the pack layer.
#pragma once

#include <cstdint>
#include <span>

#include "seqflow/pack.h"

namespace seqflow::pack::detail {

// Sets every pack's padding from plan.pad_to and plan.pack_max_length:
// kCap pads up to the cap (a pack already over it gets none), kStepMax up to
// the longest pack of the same (step, slot) across ranks, kNone not at all;
// a pack left with no tokens gets one padding token.
void apply_padding(Plan& plan);

// Fills plan.stats from the packs, the samples' lengths and the workload.
void summarize(Plan& plan, std::span<const int64_t> lengths, const Workload& workload);

}  // namespace seqflow::pack::detail
