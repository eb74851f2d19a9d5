#include "pack/limits.h"

#include <string>

#include "common/checked_math.h"
#include "pack/bin_packing.h"
#include "seqflow/error.h"
#include "seqflow/pack.h"

namespace seqflow::pack::detail {

void require_positive(std::string_view name, int64_t value) {
  if (value <= 0) throw_invalid(std::string(name) + " must be positive, got " + std::to_string(value));
}

void require_within_pack(std::string_view name, int64_t value) {
  if (value > kMaxPackLength) {
    throw_invalid(std::string(name) + " = " + std::to_string(value) + " exceeds the longest pack, " +
                  std::to_string(kMaxPackLength) + " (2^31 - 1: packs are materialized with int32 cu_seqlens)");
  }
}

void require_padding_sequences(std::string_view name, int64_t padding, int64_t pad_chunk) {
  const int64_t sequences = ceil_div(padding, pad_chunk);
  if (sequences <= kMaxPaddingSequences) return;
  throw_invalid("pad_chunk = " + std::to_string(pad_chunk) + " splits " + std::string(name) + " = " +
                std::to_string(padding) + " tokens into " + std::to_string(sequences) +
                " padding sequences, more than " + std::to_string(kMaxPaddingSequences) +
                "; raise pad_chunk to at least " + std::to_string(ceil_div(padding, kMaxPaddingSequences)));
}

void require_plan_lists(std::optional<int64_t> count, std::string_view what, std::string_view advice) {
  if (count && *count <= kMaxPlanLists) return;
  throw_invalid(std::string(what) + " = " + (count ? std::to_string(*count) : "more than int64 holds") +
                " exceeds the " + std::to_string(kMaxPlanLists) + " lists a plan may hold; " + std::string(advice));
}

void require_index(std::string_view name, int64_t value, int64_t count) {
  if (value >= 0 && value < count) return;
  throw_invalid(std::string(name) + " must be in 0.." + std::to_string(count - 1) + ", got " + std::to_string(value));
}

void require_plan_shape(int64_t dp_size, int64_t optimizer_steps, int64_t pack_max_length, int64_t pad_chunk) {
  require_positive("dp_size", dp_size);
  require_positive("optimizer_steps", optimizer_steps);
  require_positive("pack_max_length", pack_max_length);
  require_within_pack("pack_max_length", pack_max_length);
  require_positive("pad_chunk", pad_chunk);
  require_padding_sequences("pack_max_length", pack_max_length, pad_chunk);
  require_plan_lists(
      checked_mul(dp_size, optimizer_steps),
      "dp_size x optimizer_steps (" + std::to_string(dp_size) + " x " + std::to_string(optimizer_steps) + ")",
      "plan fewer ranks or steps at a time");
}

}  // namespace seqflow::pack::detail
