// Materialising a pack plan: the flat sequences a varlen attention kernel
// takes (token ids, labels, position ids and int32 cu_seqlens).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "seqflow/pack.h"

namespace seqflow::pack {

// Token ids (or labels) of every sample of a plan: entry i is sample i's.
using SampleTokens = std::span<const std::span<const int64_t>>;

// Samples stored in one flat array: sample i is values[offsets[i], offsets[i + 1]).
// The offsets must ascend and stay within values; errors call them
// `name`.offsets.
std::vector<std::span<const int64_t>> split_flat(std::span<const int64_t> values, std::span<const int64_t> offsets,
                                                 std::string_view name);

// One pack: its samples back to back, then its padding sequences.
struct PackedSequence {
  std::vector<int64_t> input_ids;     // the samples' ids, then pad_id
  std::vector<int64_t> labels;        // the samples' labels, then ignore_index
  std::vector<int64_t> position_ids;  // from 0 in every sample and padding sequence
  std::vector<int32_t> cu_seqlens;    // 0, then the end of each sample and padding sequence
  std::vector<int64_t> samples;       // sample indexes, in pack order
  int64_t padding = 0;                // padding tokens
};

struct MaterializeOptions {
  int64_t pad_id = 0;           // id of padding tokens
  int64_t ignore_index = -100;  // label of padding tokens
};

// The packs of (rank, step) of `plan`, by slot. token_ids holds one span per
// sample of the plan, each of the planned length; labels likewise, or empty
// for labels equal to the ids. Throws seqflow::Error (kInvalidArgument)
// naming the parameter and the value: rank or step out of range, a count or
// length that differs from the plan, a pack that names a sample the plan does
// not have or is longer than kMaxPackLength.
std::vector<PackedSequence> materialize(const Plan& plan, int64_t rank, int64_t step, SampleTokens token_ids,
                                        SampleTokens labels, const MaterializeOptions& options);

}  // namespace seqflow::pack
