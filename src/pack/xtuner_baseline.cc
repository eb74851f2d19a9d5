#include "pack/xtuner_baseline.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "pack/bin_packing.h"
#include "pack/plan_stats.h"
#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace seqflow::pack::baseline {

namespace {

// Karmarkar-Karp equal-size split of `samples` into k parts, as the pipeline
// does it: the count must divide.
std::vector<std::vector<int64_t>> equal_split(const std::vector<int64_t>& samples,
                                              std::span<const int64_t> lengths, int64_t k,
                                              const char* what) {
  if (samples.size() % static_cast<size_t>(k) != 0 || samples.empty()) {
    throw_invalid(std::string("baseline: ") + std::to_string(samples.size()) + " samples per " +
                  what + " split do not divide into " + std::to_string(k) +
                  " equal parts (the xtuner pipeline asserts here)");
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

Plan xtuner_pack(std::span<const int64_t> lengths, int64_t dp_size, int64_t optimizer_steps,
                 int64_t pack_max_length, int64_t pad_chunk) {
  if (dp_size <= 0 || optimizer_steps <= 0 || pack_max_length <= 0 || pad_chunk <= 0) {
    throw_invalid("baseline: dp_size, optimizer_steps, pack_max_length and pad_chunk must be positive");
  }
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0) throw_invalid("lengths[" + std::to_string(i) + "] is negative");
  }
  Plan out;
  out.dp_size = dp_size;
  out.optimizer_steps = optimizer_steps;
  out.pack_max_length = pack_max_length;
  out.pad_to = PadTo::kCap;
  out.pad_chunk = pad_chunk;
  out.packs.assign(static_cast<size_t>(dp_size),
                   std::vector<std::vector<Pack>>(static_cast<size_t>(optimizer_steps)));

  std::vector<int64_t> all(lengths.size());
  std::iota(all.begin(), all.end(), 0);
  auto ranks = equal_split(all, lengths, dp_size, "rank");
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    auto steps = equal_split(ranks[rank], lengths, optimizer_steps, "step");
    for (size_t step = 0; step < steps.size(); ++step) {
      std::vector<int64_t> sub;
      for (int64_t s : steps[step]) sub.push_back(lengths[s]);
      const int64_t tokens = std::accumulate(sub.begin(), sub.end(), int64_t{0});
      const int64_t count = std::max<int64_t>(1, detail::ceil_div(tokens, pack_max_length));
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
  for (int64_t step = 0; step < optimizer_steps; ++step) {
    size_t most = 0;
    for (const auto& rank : out.packs) most = std::max(most, rank[step].size());
    for (auto& rank : out.packs) rank[step].resize(most);
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
