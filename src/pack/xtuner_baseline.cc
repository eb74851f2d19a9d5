#include "pack/xtuner_baseline.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

#include "common/checked_math.h"
#include "pack/bin_packing.h"
#include "pack/limits.h"
#include "pack/plan_stats.h"
#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace seqflow::pack::baseline {

namespace {

// Karmarkar-Karp equal-size split of `samples` into k parts, as the pipeline
// does it: the count must divide. `whose` says whose samples they are and
// `parameter` names k, for the error.
std::vector<std::vector<int64_t>> equal_split(const std::vector<int64_t>& samples, std::span<const int64_t> lengths,
                                              int64_t k, const std::string& whose, const char* parameter) {
  if (samples.size() % static_cast<size_t>(k) != 0 || samples.empty()) {
    throw_invalid("baseline: " + whose + std::to_string(samples.size()) + " samples do not split into " + parameter +
                  " = " + std::to_string(k) + " equal parts (the xtuner pipeline asserts here)");
  }
  std::vector<int64_t> sub(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) sub[i] = lengths[samples[i]];
  auto parts = balance::get_seqlen_balanced_partitions(sub, k, /*equal_size=*/true);
  for (auto& part : parts) {
    for (int64_t& index : part) index = samples[index];
  }
  return parts;
}

}  // namespace

Plan xtuner_pack(std::span<const int64_t> lengths, int64_t dp_size, int64_t optimizer_steps, int64_t pack_max_length,
                 int64_t pad_chunk) {
  detail::require_plan_shape(dp_size, optimizer_steps, pack_max_length, pad_chunk);
  // The tokens' total bounds every sum below, the packs' real tokens included.
  Workload::tokens().total(Workload::tokens().costs(lengths, "lengths"), "lengths");
  Plan out;
  out.lengths.assign(lengths.begin(), lengths.end());
  out.dp_size = dp_size;
  out.optimizer_steps = optimizer_steps;
  out.pack_max_length = pack_max_length;
  out.pad_to = PadTo::kCap;
  out.pad_chunk = pad_chunk;
  out.packs.assign(static_cast<size_t>(dp_size), std::vector<std::vector<Pack>>(static_cast<size_t>(optimizer_steps)));

  std::vector<int64_t> all(lengths.size());
  std::iota(all.begin(), all.end(), 0);
  auto ranks = equal_split(all, lengths, dp_size, "", "dp_size");
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    auto steps =
        equal_split(ranks[rank], lengths, optimizer_steps, "rank " + std::to_string(rank) + "'s ", "optimizer_steps");
    for (size_t step = 0; step < steps.size(); ++step) {
      std::vector<int64_t> sub;
      for (int64_t s : steps[step]) sub.push_back(lengths[s]);
      const int64_t tokens = std::accumulate(sub.begin(), sub.end(), int64_t{0});
      const int64_t count = std::max<int64_t>(1, detail::ceil_div(tokens, pack_max_length));
      detail::require_plan_lists(
          count,
          "ceil(tokens / pack_max_length) packs of rank " + std::to_string(rank) + ", step " + std::to_string(step),
          "raise pack_max_length");
      for (auto& part : balance::karmarkar_karp(sub, count, /*equal_size=*/false)) {
        Pack& pack = out.packs[rank][step].emplace_back();
        for (int64_t index : part) {
          pack.samples.push_back(steps[step][index]);
          pack.tokens += sub[index];
        }
        std::sort(pack.samples.begin(), pack.samples.end());
      }
    }
  }
  // Pack counts padded across ranks: dp_size times the most in each step.
  std::vector<size_t> most(static_cast<size_t>(optimizer_steps), 0);
  std::optional<int64_t> packs = 0;
  for (size_t step = 0; step < most.size(); ++step) {
    for (const auto& rank : out.packs) most[step] = std::max(most[step], rank[step].size());
    auto step_packs = checked_mul(dp_size, static_cast<int64_t>(most[step]));
    packs = packs && step_packs ? checked_add(*packs, *step_packs) : std::nullopt;
  }
  detail::require_plan_lists(packs, "packs, padded across ranks", "raise pack_max_length");
  for (size_t step = 0; step < most.size(); ++step) {
    for (auto& rank : out.packs) rank[step].resize(most[step]);
  }
  detail::apply_padding(out);
  detail::summarize(out, lengths, Workload::tokens());
  if (out.stats.packs_over_cap > 0) {
    out.notes.push_back(std::to_string(out.stats.packs_over_cap) + " packs exceed pack_max_length (" +
                        std::to_string(pack_max_length) + "); the largest holds " +
                        std::to_string(out.stats.max_pack_tokens) + " tokens");
  }
  return out;
}

}  // namespace seqflow::pack::baseline
