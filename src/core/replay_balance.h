// A replay pass's per-DP-rank balance (ReplayOptions::balance_ranks): the
// selected trajectories reordered rank by rank, as verl's trainer reorders a
// sampled batch (_balance_batch) before dispatching equal chunks to ranks.
#pragma once

#include "seqflow/replay.h"
#include "seqflow/workload.h"

namespace seqflow::core {

// The most ranks a pass balances over (as the balancing engine's verl
// functions allow).
inline constexpr int64_t kMaxReplayBalanceRanks = int64_t{1} << 20;

// The workload balance_workload names (tokens, verl or quadratic: integer
// costs); throws kInvalidArgument naming balance_workload otherwise.
Workload replay_balance_workload(const std::string& spec);

// Reorders pass.keys and pass.tags rank by rank and fills the pass's
// rank_sizes, rank_lengths and arrival_rank_lengths; leaves a pass whose
// trajectories are not a multiple of the ranks as it is. Throws
// kInvalidArgument, changing nothing, when a trajectory's length tag is
// missing or not a non-negative integer, or its cost overflows (naming the
// key and the tag).
void balance_selected(const ReplayOptions& options, ReplayPass& pass);

}  // namespace seqflow::core
