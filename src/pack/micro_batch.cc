// seqflow::pack::micro_batches: verl's dynamic batch size with the token cap
// enforced, one count for every rank, and counts that suit pipeline schedules.
#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

#include "common/checked_math.h"
#include "pack/bin_packing.h"
#include "pack/limits.h"
#include "seqflow/balance.h"
#include "seqflow/error.h"
#include "seqflow/pack.h"

namespace seqflow::pack {

namespace {

void validate_options(int64_t max_token_len, const MicroBatchOptions& options) {
  detail::require_positive("max_token_len", max_token_len);
  detail::require_positive("dp_size", options.dp_size);
  detail::require_positive("count_multiple", options.count_multiple);
  // Every rank gets at least count_multiple micro-batches.
  detail::require_plan_lists(checked_mul(options.dp_size, options.count_multiple),
                             "dp_size x count_multiple (" + std::to_string(options.dp_size) + " x " +
                                 std::to_string(options.count_multiple) + ") micro-batches",
                             "lower count_multiple or plan fewer ranks at a time");
}

// `name` is how an error names one length, e.g. "lengths[3]".
void validate_length(int64_t length, const std::string& name, int64_t max_token_len) {
  if (length < 0) {
    throw_invalid(name + " = " + std::to_string(length) + " is negative; lengths must be >= 0");
  }
  if (length > max_token_len) {
    throw_invalid(name + " = " + std::to_string(length) + " exceeds max_token_len (" + std::to_string(max_token_len) +
                  "): that sample fits in no micro-batch; raise max_token_len or truncate it");
  }
}

// Before the micro-batches are allocated: `counts` per rank.
void require_micro_batches(const std::vector<int64_t>& counts) {
  std::optional<int64_t> total = 0;
  for (int64_t count : counts) total = total ? checked_add(*total, count) : std::nullopt;
  const int64_t most = *std::max_element(counts.begin(), counts.end());
  detail::require_plan_lists(total, "micro-batches over all ranks (up to " + std::to_string(most) + " per rank)",
                             "raise max_token_len or lower count_multiple");
}

int64_t round_up(int64_t value, int64_t multiple) { return detail::ceil_div(value, multiple) * multiple; }

// Micro-batch indexes in the requested order; empty micro-batches last.
std::vector<size_t> batch_order(const std::vector<std::vector<int64_t>>& batches, const std::vector<int64_t>& workloads,
                                MicroBatchOrder order) {
  std::vector<size_t> filled;
  std::vector<size_t> empty;
  for (size_t b = 0; b < batches.size(); ++b) (batches[b].empty() ? empty : filled).push_back(b);
  if (order != MicroBatchOrder::kNone) {
    std::stable_sort(filled.begin(), filled.end(), [&](size_t a, size_t b) { return workloads[a] > workloads[b]; });
  }
  std::vector<size_t> out;
  out.reserve(batches.size());
  if (order == MicroBatchOrder::kInterleave) {
    size_t lo = 0;
    size_t hi = filled.size();
    while (lo < hi) {
      out.push_back(filled[lo++]);
      if (lo < hi) out.push_back(filled[--hi]);
    }
  } else {
    out = filled;
  }
  out.insert(out.end(), empty.begin(), empty.end());
  return out;
}

}  // namespace

MicroBatchOrder parse_micro_batch_order(std::string_view name) {
  if (name == "interleave") return MicroBatchOrder::kInterleave;
  if (name == "descending") return MicroBatchOrder::kDescending;
  if (name == "none") return MicroBatchOrder::kNone;
  throw_invalid("order: unknown value '" + std::string(name) + "'; expected interleave, descending or none");
}

std::string_view to_string(MicroBatchOrder order) {
  switch (order) {
    case MicroBatchOrder::kInterleave:
      return "interleave";
    case MicroBatchOrder::kDescending:
      return "descending";
    case MicroBatchOrder::kNone:
      return "none";
  }
  return "?";
}

MicroBatchPlan micro_batches_per_rank(std::span<const std::span<const int64_t>> lengths_per_rank, int64_t max_token_len,
                                      const MicroBatchOptions& options) {
  validate_options(max_token_len, options);
  const auto dp = static_cast<int64_t>(lengths_per_rank.size());
  if (dp != options.dp_size) {
    throw_invalid("dp_size (" + std::to_string(options.dp_size) +
                  ") must equal the number of ranks whose lengths are given (" + std::to_string(dp) + ")");
  }
  std::vector<std::vector<int64_t>> tokens(static_cast<size_t>(dp));
  for (int64_t rank = 0; rank < dp; ++rank) {
    const auto lengths = lengths_per_rank[rank];
    int64_t total = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      validate_length(lengths[i], "lengths[" + std::to_string(rank) + "][" + std::to_string(i) + "]", max_token_len);
      auto sum = checked_add(total, lengths[i]);
      if (!sum) throw_invalid("lengths: rank " + std::to_string(rank) + "'s tokens overflow int64");
      total = *sum;
    }
    tokens[rank].assign(lengths.begin(), lengths.end());
    options.workload.total(options.workload.costs(tokens[rank], "lengths[" + std::to_string(rank) + "]"),
                           "lengths[" + std::to_string(rank) + "]");
  }

  MicroBatchPlan out;
  std::vector<std::vector<int64_t>> assignments(static_cast<size_t>(dp));
  std::vector<int64_t> counts(static_cast<size_t>(dp));
  for (int64_t rank = 0; rank < dp; ++rank) {
    auto bins = detail::fewest_bins(tokens[rank], max_token_len, options.workload, 1);
    out.min_counts.push_back(bins.count);
    counts[rank] = round_up(bins.count, options.count_multiple);
    if (counts[rank] == bins.count) assignments[rank] = std::move(bins.assignment);
  }
  if (options.same_count_across_ranks) {
    int64_t count = *std::max_element(counts.begin(), counts.end());
    assignments = detail::fit_all_into_bins(tokens, count, options.count_multiple, max_token_len, options.workload);
    std::fill(counts.begin(), counts.end(), count);
  } else {
    for (int64_t rank = 0; rank < dp; ++rank) {
      if (!assignments[rank].empty() || tokens[rank].empty()) continue;
      std::vector<std::vector<int64_t>> one{tokens[rank]};
      assignments[rank] = std::move(
          detail::fit_all_into_bins(one, counts[rank], options.count_multiple, max_token_len, options.workload)[0]);
    }
  }

  require_micro_batches(counts);
  for (int64_t rank = 0; rank < dp; ++rank) {
    const auto count = static_cast<size_t>(counts[rank]);
    std::vector<std::vector<int64_t>> batches(count);
    std::vector<int64_t> batch_tokens(count, 0);
    std::vector<int64_t> batch_workloads(count, 0);
    for (size_t i = 0; i < tokens[rank].size(); ++i) {
      const auto b = static_cast<size_t>(assignments[rank][i]);
      batches[b].push_back(static_cast<int64_t>(i));
      batch_tokens[b] += tokens[rank][i];
      batch_workloads[b] += options.workload.cost(tokens[rank][i]);
    }
    auto& rank_batches = out.batches.emplace_back();
    auto& rank_tokens = out.tokens.emplace_back();
    auto& rank_workloads = out.workloads.emplace_back();
    for (size_t b : batch_order(batches, batch_workloads, options.order)) {
      out.empty_batches += batches[b].empty();
      rank_batches.push_back(std::move(batches[b]));
      rank_tokens.push_back(batch_tokens[b]);
      rank_workloads.push_back(batch_workloads[b]);
    }
  }
  return out;
}

MicroBatchPlan micro_batches(std::span<const int64_t> lengths, int64_t max_token_len,
                             const MicroBatchOptions& options) {
  validate_options(max_token_len, options);
  for (size_t i = 0; i < lengths.size(); ++i) {
    validate_length(lengths[i], "lengths[" + std::to_string(i) + "]", max_token_len);
  }
  options.workload.total(options.workload.costs(lengths, "lengths"), "lengths");
  const int64_t dp = options.dp_size;
  const auto n = static_cast<int64_t>(lengths.size());
  // Samples per rank (global indexes, ascending).
  std::vector<std::vector<int64_t>> samples(static_cast<size_t>(dp));
  if (n >= dp) {
    balance::Options split;
    split.cardinality = balance::Cardinality::kBalanced;
    split.workload = options.workload;
    samples = balance::partition(lengths, dp, split).parts;
  } else {
    for (int64_t i = 0; i < n; ++i) samples[i].push_back(i);
  }
  std::vector<std::vector<int64_t>> rank_lengths(samples.size());
  std::vector<std::span<const int64_t>> spans;
  for (size_t rank = 0; rank < samples.size(); ++rank) {
    for (int64_t s : samples[rank]) rank_lengths[rank].push_back(lengths[s]);
    spans.emplace_back(rank_lengths[rank]);
  }
  MicroBatchPlan out = micro_batches_per_rank(spans, max_token_len, options);
  for (size_t rank = 0; rank < samples.size(); ++rank) {
    for (auto& batch : out.batches[rank]) {
      for (int64_t& index : batch) index = samples[rank][index];
    }
  }
  return out;
}

}  // namespace seqflow::pack
