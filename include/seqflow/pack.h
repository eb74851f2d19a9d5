// The pack planner and the micro-batch planner.
//
// Before an optimizer update, the samples of a global batch are spread over
// data-parallel ranks, split into gradient-accumulation (optimizer) steps and
// packed into sequences of at most `pack_max_length` tokens. `plan` does all
// three with guarantees that hold for every input:
//   - every sample appears exactly once;
//   - every rank has exactly `optimizer_steps` steps;
//   - every pack holds at most `pack_max_length` real tokens (a longer sample
//     is an error that names it);
//   - within a step every rank has the same number of packs (padding packs
//     fill in), so collectives never deadlock;
//   - a group (e.g. the responses of one prompt) stays on one rank and in one
//     step, and steps hold group counts within one of each other.
// Balance is on the workload model; the token cap is on lengths. Within a
// step, ranks get even workloads; steps get even workloads too, unless a
// (rank, step) would hold about one group: then steps are formed from groups
// of similar workload, so that ranks stay even within a step (notes say so).
//
// `micro_batches` splits each rank's samples into the fewest micro-batches
// under a token cap, with the same count on every rank.
//
// Pure functions over arrays, built on seqflow::balance.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqflow/workload.h"

namespace seqflow::pack {

// The longest pack, and so the largest pack_max_length and padding: packs are
// materialized with int32 cu_seqlens (what varlen attention kernels take).
inline constexpr int64_t kMaxPackLength = INT32_MAX;

// The most lists a plan may hold: its (rank, step) pairs, its packs, the
// micro-batches of a micro-batch plan. A plan at the limit takes about 1 GB
// once in Python; larger requests are refused before anything is allocated.
inline constexpr int64_t kMaxPlanLists = int64_t{1} << 20;

// The most padding sequences in one pack (entries of its cu_seqlens):
// ceil(pack_max_length / pad_chunk) may not exceed it, so that a pack's
// padding is never described by billions of one-token sequences.
inline constexpr int64_t kMaxPaddingSequences = int64_t{1} << 20;

// How packs are padded.
enum class PadTo {
  kCap,      // every pack to pack_max_length: static shapes
  kStepMax,  // every pack to the longest pack in its slot (same step, same
             // position) across ranks
  kNone,     // no padding, except that a pack is never empty (see Pack)
};

PadTo parse_pad_to(std::string_view name);  // "cap", "step_max", "none"
std::string_view to_string(PadTo pad_to);

// The phases of plan(), in the order they run (see plan() above).
enum class PlanPhase {
  kStepsFirst,   // samples split over optimizer steps, then each step over ranks
  kStepsBySize,  // the other layout, tried only when balanced steps leave ranks waiting
  kPacking,      // each (rank, step) packed under the cap
};

std::string_view to_string(PlanPhase phase);  // "steps_first", "steps_by_size", "packing"

// Where plan() is: `done` of `total` samples through `phase`.
struct PlanProgress {
  PlanPhase phase = PlanPhase::kStepsFirst;
  int64_t done = 0;
  int64_t total = 0;
};

// Calls per phase are bounded, whatever the number of samples or steps: one
// as the phase starts (done 0), one as it ends (done == total) and at most
// kProgressUpdates between, as done crosses each 1/kProgressUpdates of total
// (work is counted a step at a time, never per sample).
inline constexpr int64_t kProgressUpdates = 1000;
using PlanProgressCallback = std::function<void(const PlanProgress&)>;

struct Options {
  int64_t dp_size = 1;
  int64_t optimizer_steps = 1;
  int64_t pack_max_length = 0;
  // One group id per sample; a group stays on one rank and in one step.
  // Empty means every sample is its own group.
  std::span<const int64_t> groups = {};
  Workload workload = Workload::tokens();
  PadTo pad_to = PadTo::kCap;
  int64_t pad_chunk = 1024;  // no padding sequence is longer than this
  // The planner uses no randomness; the seed only decides which rank gets
  // which part where ranks are tied (seed 0 keeps rank order).
  uint64_t seed = 0;
  // Called on plan()'s thread as it works (see PlanProgress); an exception it
  // throws leaves plan() without a plan. Empty: no progress reported. The plan
  // is the same either way.
  PlanProgressCallback progress = {};
};

// One packed sequence: the samples, then `padding` tokens split into padding
// sequences of at most pad_chunk tokens (see padding_sequences). A pack is
// never empty: a pack without tokens gets one padding token.
struct Pack {
  std::vector<int64_t> samples;  // sample indexes, ascending
  int64_t tokens = 0;            // real tokens: the sum of the samples' lengths
  int64_t padding = 0;           // padding tokens

  int64_t padded_length() const { return tokens + padding; }
};

struct Stats {
  std::vector<std::vector<int64_t>> tokens;     // [rank][step] real tokens
  std::vector<std::vector<int64_t>> workloads;  // [rank][step] workload
  std::vector<double> token_spread;             // per step: (max - min) / mean over ranks
  std::vector<double> workload_spread;          // per step, likewise for workload
  std::vector<int64_t> packs_per_step;          // the same on every rank
  // Per step: max over ranks of ceil(tokens / pack_max_length), at least 1;
  // no packing of this rank split has fewer packs.
  std::vector<int64_t> min_packs_per_step;
  int64_t real_tokens = 0;
  int64_t padding_tokens = 0;
  double padding_ratio = 0.0;    // padding / (real + padding)
  int64_t padding_packs = 0;     // packs without samples
  int64_t empty_rank_steps = 0;  // (rank, step) pairs without samples
  int64_t max_pack_tokens = 0;   // real tokens of the fullest pack
  int64_t packs_over_cap = 0;    // always 0 for plan(); baselines may break the cap
};

struct Plan {
  std::vector<int64_t> lengths;  // tokens per sample, as planned
  int64_t dp_size = 0;
  int64_t optimizer_steps = 0;
  int64_t pack_max_length = 0;
  PadTo pad_to = PadTo::kCap;
  int64_t pad_chunk = 0;
  std::vector<std::vector<std::vector<Pack>>> packs;  // [rank][step][slot]
  Stats stats;
  std::vector<std::string> notes;  // things a user should know, e.g. padding-only steps
};

// Plans the packs of one global batch. Throws seqflow::Error
// (kInvalidArgument) on bad input, naming the parameter and the value:
// pack_max_length above kMaxPackLength, a pad_chunk that would split a pack's
// padding into more than kMaxPaddingSequences, more than kMaxPlanLists
// rank-steps or packs, a total workload beyond Workload::kMaxTotalCost.
Plan plan(std::span<const int64_t> lengths, const Options& options);

// Pack `slot` of (rank, step) of `plan`. Each index must be in range, e.g.
// "rank must be in 0..3, got 4" (no negative indexing).
const Pack& pack_at(const Plan& plan, int64_t rank, int64_t step, int64_t slot);

// The lengths of the padding sequences that make up `padding` tokens: full
// chunks of pad_chunk, then the remainder. padding is at most kMaxPackLength,
// and makes at most kMaxPaddingSequences sequences.
std::vector<int64_t> padding_sequences(int64_t padding, int64_t pad_chunk);

// Order of the micro-batches of one rank.
enum class MicroBatchOrder {
  kInterleave,  // largest, smallest, second largest, ... by workload: shrinks pipeline bubbles
  kDescending,  // by workload, largest first
  kNone,        // as planned
};

MicroBatchOrder parse_micro_batch_order(std::string_view name);  // "interleave", "descending", "none"
std::string_view to_string(MicroBatchOrder order);

struct MicroBatchOptions {
  int64_t dp_size = 1;
  bool same_count_across_ranks = true;
  int64_t count_multiple = 1;  // every count is a multiple of this (pipeline schedules)
  Workload workload = Workload::tokens();
  MicroBatchOrder order = MicroBatchOrder::kInterleave;
};

struct MicroBatchPlan {
  // [rank][micro-batch] -> sample indexes, ascending. Indexes are global for
  // micro_batches and local to the rank for micro_batches_per_rank.
  std::vector<std::vector<std::vector<int64_t>>> batches;
  std::vector<std::vector<int64_t>> tokens;     // [rank][micro-batch]
  std::vector<std::vector<int64_t>> workloads;  // [rank][micro-batch]
  // Per rank: the fewest micro-batches its samples alone need under the cap.
  std::vector<int64_t> min_counts;
  int64_t empty_batches = 0;  // micro-batches without samples (a rank with too few samples)
};

// Splits all samples over dp_size ranks (balanced), then each rank's samples
// into micro-batches of at most max_token_len tokens: the fewest such that the
// cap holds, the same count on every rank if asked, a multiple of
// count_multiple, balanced by workload. A plan of more than kMaxPlanLists
// micro-batches (over all ranks) is refused.
MicroBatchPlan micro_batches(std::span<const int64_t> lengths, int64_t max_token_len, const MicroBatchOptions& options);

// As micro_batches, for samples already placed on ranks: one span per rank
// (options.dp_size must equal their count).
MicroBatchPlan micro_batches_per_rank(std::span<const std::span<const int64_t>> lengths_per_rank, int64_t max_token_len,
                                      const MicroBatchOptions& options);

// ---- verl's rearrange_micro_batches ---------------------------------------
// The plan behind seqflow.compat.verl.rearrange_micro_batches (verl 0.9.1):
// micro-batches of at most max_token_len tokens, at least min_count and
// ceil(tokens / cap) of them, a multiple of count_multiple, never more than
// verl needs; verl's own Karmarkar-Karp split (get_seqlen_balanced_partitions
// of the workloads) wherever it fits the cap at the count chosen.
//
// Data-parallel ranks that must agree on the count take three steps and
// combine each step's result over the ranks (an all-reduce) before the next:
//   needs = verl_micro_batch_needs(...)       combine: max of lower, longest,
//                                             planned; min of groups
//   fits = verl_split_fits(..., needs)        combine: min of each entry
//   verl_micro_batches(..., needs, fits)      the rank's plan
// A rank alone calls verl_micro_batches(lengths, options) once.
struct VerlMicroBatchOptions {
  int64_t max_token_len = 0;
  int64_t force_group_size = 1;  // runs of this many consecutive samples stay in one micro-batch
  int64_t min_count = 0;         // min_num_micro_batch
  int64_t count_multiple = 1;    // num_batches_divided_by
  bool balance_order = true;     // use_dynamic_bsz_balance: heaviest in the middle, lightest at both ends
};

struct VerlMicroBatchNeeds {
  int64_t lower = 0;    // the fewest verl tries: max(min(groups, ceil(tokens / cap)), min_count, 1)
  int64_t longest = 0;  // tokens of the longest group
  int64_t planned = 0;  // micro-batches seqflow's planner needs (0 when longest > max_token_len)
  int64_t groups = 0;   // groups to fill micro-batches with
};

// Throws (kInvalidArgument, naming the parameter) on no lengths, a negative
// length, a length count that is not a multiple of force_group_size.
VerlMicroBatchNeeds verl_micro_batch_needs(std::span<const int64_t> lengths, const VerlMicroBatchOptions& options);

// For each count verl tries before the planner's (agreed.lower rounded up to
// count_multiple, then every count_multiple-th below agreed.planned rounded
// likewise): 1 if verl's split at that count fits the cap here, else 0.
// Throws when agreed.longest exceeds max_token_len (on every rank alike).
std::vector<int64_t> verl_split_fits(std::span<const int64_t> lengths, const VerlMicroBatchOptions& options,
                                     const VerlMicroBatchNeeds& agreed);

// The row indexes of each micro-batch, each ascending, in the order asked:
// the lowest count whose entry of agreed_fits is 1, verl's split at it; else
// the planner's count, verl's split if it fits, else the planner's plan with
// its costliest micro-batches halved. Throws when that count exceeds
// agreed.groups. The agreed values are checked against this rank's own.
std::vector<std::vector<int64_t>> verl_micro_batches(std::span<const int64_t> lengths,
                                                     const VerlMicroBatchOptions& options,
                                                     const VerlMicroBatchNeeds& agreed,
                                                     std::span<const int64_t> agreed_fits);

// One rank alone: the three steps without combining.
std::vector<std::vector<int64_t>> verl_micro_batches(std::span<const int64_t> lengths,
                                                     const VerlMicroBatchOptions& options);

// Sample indexes in micro-batch order: those of `rank`, or of all ranks, rank
// by rank, when rank is nullopt (rank must be in 0..ranks-1).
std::vector<int64_t> micro_batch_order(const MicroBatchPlan& plan, std::optional<int64_t> rank);

// Positions such that outputs[positions] lists outputs laid out in `order`
// by ascending sample index (for a permutation: inverse_permutation(order)).
std::vector<int64_t> restore_order(std::span<const int64_t> order);

// inverse[order[i]] = i: applied to outputs laid out in `order`, restores the
// original order (outputs_in_original_order[j] = outputs[inverse[j]]).
// `order` must be a permutation of 0..n-1.
std::vector<int64_t> inverse_permutation(std::span<const int64_t> order);

}  // namespace seqflow::pack
