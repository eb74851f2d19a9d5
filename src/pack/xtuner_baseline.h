// A BASELINE, for comparison only: the pack pipeline that xtuner's balanced
// packing refactor describes, written from that description. `seqflow pack
// --compare` and bench/pack_bench.py run it beside seqflow::pack::plan.
//
//   1. Karmarkar-Karp equal-size split of the samples over DP ranks;
//   2. per rank, Karmarkar-Karp equal-size split over optimizer steps;
//   3. per (rank, step), Karmarkar-Karp into ceil(tokens / cap) packs;
//   4. every pack padded up to the cap with padding sequences of at most
//      pad_chunk tokens;
//   5. full padding packs so that every rank has the same pack count per step.
//
// It keeps that pipeline's defects on purpose: it fails (seqflow::Error) when
// the sample count does not divide by dp_size, or a rank's count by
// optimizer_steps, and it does not enforce the cap (stats.packs_over_cap
// counts the packs over it). Do not use it to train.
#pragma once

#include <cstdint>
#include <span>

#include "seqflow/pack.h"

namespace seqflow::pack::baseline {

Plan xtuner_pack(std::span<const int64_t> lengths, int64_t dp_size, int64_t optimizer_steps, int64_t pack_max_length,
                 int64_t pad_chunk = 1024);

}  // namespace seqflow::pack::baseline
