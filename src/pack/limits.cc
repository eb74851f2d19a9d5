#include "pack/limits.h"

#include <string>

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
                  std::to_string(kMaxPackLength) +
                  " (2^31 - 1: packs are materialized with int32 cu_seqlens)");
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
                " exceeds the " + std::to_string(kMaxPlanLists) + " lists a plan may hold; " +
                std::string(advice));
}

}  // namespace seqflow::pack::detail
