// seqflow::pack::materialize: a plan's packs as flat arrays.
#include "seqflow/packed_sequence.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "pack/limits.h"
#include "seqflow/error.h"

namespace seqflow::pack {

namespace {

void require_tokens(const Plan& plan, SampleTokens token_ids, SampleTokens labels) {
  const size_t samples = plan.lengths.size();
  if (token_ids.size() != samples) {
    throw_invalid("token_ids has " + std::to_string(token_ids.size()) + " samples but the plan has " +
                  std::to_string(samples));
  }
  if (!labels.empty() && labels.size() != samples) {
    throw_invalid("labels has " + std::to_string(labels.size()) + " samples but token_ids has " +
                  std::to_string(samples));
  }
}

// Sample `index` of a pack, checked against the plan before any copy.
void require_sample(const Plan& plan, int64_t index, SampleTokens token_ids, SampleTokens labels) {
  if (index < 0 || static_cast<size_t>(index) >= plan.lengths.size()) {
    throw_invalid("the plan's packs name sample " + std::to_string(index) + " but the plan has " +
                  std::to_string(plan.lengths.size()) + " samples");
  }
  const auto i = static_cast<size_t>(index);
  const auto tokens = static_cast<int64_t>(token_ids[i].size());
  if (tokens != plan.lengths[i]) {
    throw_invalid("token_ids[" + std::to_string(index) + "] has " + std::to_string(tokens) +
                  " tokens but the plan was made with length " + std::to_string(plan.lengths[i]));
  }
  if (!labels.empty() && labels[i].size() != token_ids[i].size()) {
    throw_invalid("labels[" + std::to_string(index) + "] has " + std::to_string(labels[i].size()) +
                  " entries, token_ids[" + std::to_string(index) + "] " + std::to_string(tokens));
  }
}

// Appends one sequence of `length` tokens: its boundary and positions from 0.
void add_sequence(PackedSequence& out, int64_t length) {
  const size_t start = out.position_ids.size();
  out.position_ids.resize(start + static_cast<size_t>(length));
  std::iota(out.position_ids.begin() + static_cast<std::ptrdiff_t>(start), out.position_ids.end(), int64_t{0});
  out.cu_seqlens.push_back(static_cast<int32_t>(out.position_ids.size()));
}

PackedSequence build(const Plan& plan, const Pack& pack, SampleTokens token_ids, SampleTokens labels,
                     const MaterializeOptions& options) {
  // Checked one term at a time: a plan made by hand may claim anything.
  int64_t length = pack.padding;
  for (size_t i = 0; i < pack.samples.size() && length >= 0 && length <= kMaxPackLength; ++i) {
    require_sample(plan, pack.samples[i], token_ids, labels);
    length += plan.lengths[static_cast<size_t>(pack.samples[i])];
  }
  if (length < 0 || length > kMaxPackLength) {
    throw_invalid("a pack of the plan holds " + std::to_string(pack.samples.size()) + " samples and " +
                  std::to_string(pack.padding) + " padding tokens, beyond 0.." + std::to_string(kMaxPackLength) +
                  " tokens");
  }
  const std::vector<int64_t> pads = padding_sequences(pack.padding, plan.pad_chunk);
  PackedSequence out;
  out.samples = pack.samples;
  out.padding = pack.padding;
  const auto size = static_cast<size_t>(length);
  out.input_ids.reserve(size);
  out.labels.reserve(size);
  out.position_ids.reserve(size);
  out.cu_seqlens.reserve(pack.samples.size() + pads.size() + 1);
  out.cu_seqlens.push_back(0);
  for (int64_t index : pack.samples) {
    const auto ids = token_ids[static_cast<size_t>(index)];
    const auto labs = labels.empty() ? ids : labels[static_cast<size_t>(index)];
    out.input_ids.insert(out.input_ids.end(), ids.begin(), ids.end());
    out.labels.insert(out.labels.end(), labs.begin(), labs.end());
    add_sequence(out, static_cast<int64_t>(ids.size()));
  }
  out.input_ids.resize(size, options.pad_id);
  out.labels.resize(size, options.ignore_index);
  for (int64_t pad : pads) add_sequence(out, pad);
  return out;
}

}  // namespace

std::vector<std::span<const int64_t>> split_flat(std::span<const int64_t> values, std::span<const int64_t> offsets,
                                                 std::string_view name) {
  const bool ascending = std::is_sorted(offsets.begin(), offsets.end());
  if (offsets.empty() || !ascending || offsets.front() < 0 || offsets.back() > static_cast<int64_t>(values.size())) {
    throw_invalid(std::string(name) + ".offsets must be ascending and within values");
  }
  std::vector<std::span<const int64_t>> out;
  out.reserve(offsets.size() - 1);
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    out.push_back(values.subspan(static_cast<size_t>(offsets[i]), static_cast<size_t>(offsets[i + 1] - offsets[i])));
  }
  return out;
}

std::vector<PackedSequence> materialize(const Plan& plan, int64_t rank, int64_t step, SampleTokens token_ids,
                                        SampleTokens labels, const MaterializeOptions& options) {
  detail::require_index("rank", rank, static_cast<int64_t>(plan.packs.size()));
  const auto& steps = plan.packs[static_cast<size_t>(rank)];
  detail::require_index("step", step, static_cast<int64_t>(steps.size()));
  require_tokens(plan, token_ids, labels);
  std::vector<PackedSequence> out;
  for (const Pack& pack : steps[static_cast<size_t>(step)]) {
    out.push_back(build(plan, pack, token_ids, labels, options));
  }
  return out;
}

}  // namespace seqflow::pack
