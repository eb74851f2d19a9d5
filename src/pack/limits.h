// Checks of the pack layer's parameters against its limits (kMaxPackLength,
// kMaxPaddingSequences, kMaxPlanLists), shared by the planner, the
// micro-batch planner and the baseline so that each refuses the same way,
// before it allocates.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace seqflow::pack::detail {

// What every pack plan (the planner's and the baseline's) needs of its shape:
// positive counts, pack_max_length within kMaxPackLength, pad_chunk within
// kMaxPaddingSequences per pack, dp_size x optimizer_steps within kMaxPlanLists.
void require_plan_shape(int64_t dp_size, int64_t optimizer_steps, int64_t pack_max_length, int64_t pad_chunk);

// `name` must be > 0.
void require_positive(std::string_view name, int64_t value);

// `name` must be at most kMaxPackLength.
void require_within_pack(std::string_view name, int64_t value);

// `padding` tokens (named `name`) in chunks of pad_chunk (> 0) make at most
// kMaxPaddingSequences padding sequences.
void require_padding_sequences(std::string_view name, int64_t padding, int64_t pad_chunk);

// `name` must be in 0..count-1: an index into a plan (no negative indexing).
void require_index(std::string_view name, int64_t value, int64_t count);

// A plan may hold at most kMaxPlanLists lists; `count` is nullopt when
// computing it overflowed. `what` names the count with its factors, e.g.
// "dp_size x optimizer_steps (4 x 8)"; `advice` says how to need fewer.
void require_plan_lists(std::optional<int64_t> count, std::string_view what, std::string_view advice);

}  // namespace seqflow::pack::detail
