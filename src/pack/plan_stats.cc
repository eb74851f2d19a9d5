#include "pack/plan_stats.h"

#include <algorithm>

#include "common/checked_math.h"
#include "pack/bin_packing.h"
#include "seqflow/error.h"

namespace seqflow::pack::detail {

namespace {

// (max - min) / mean of one step's values across ranks; 0 when all are 0.
double spread_of(const std::vector<std::vector<int64_t>>& per_rank, size_t step) {
  int64_t lo = per_rank[0][step];
  int64_t hi = lo;
  double total = 0;
  for (const auto& rank : per_rank) {
    lo = std::min(lo, rank[step]);
    hi = std::max(hi, rank[step]);
    total += static_cast<double>(rank[step]);
  }
  const double mean = total / static_cast<double>(per_rank.size());
  return mean > 0 ? static_cast<double>(hi - lo) / mean : 0.0;
}

// total + value, or an error naming the statistic.
int64_t add_to(int64_t total, int64_t value, const char* statistic) {
  auto sum = checked_add(total, value);
  if (!sum) throw_invalid(std::string("stats.") + statistic + " of the plan overflows int64");
  return *sum;
}

}  // namespace

void apply_padding(Plan& plan) {
  const auto steps = static_cast<size_t>(plan.optimizer_steps);
  for (size_t step = 0; step < steps; ++step) {
    const size_t slots = plan.packs[0][step].size();
    for (size_t slot = 0; slot < slots; ++slot) {
      int64_t target = 0;
      if (plan.pad_to == PadTo::kCap) {
        target = plan.pack_max_length;
      } else if (plan.pad_to == PadTo::kStepMax) {
        for (const auto& rank : plan.packs) target = std::max(target, rank[step][slot].tokens);
      }
      for (auto& rank : plan.packs) {
        Pack& pack = rank[step][slot];
        pack.padding = std::max<int64_t>(target - pack.tokens, 0);
        if (pack.padded_length() == 0) pack.padding = 1;
      }
    }
  }
}

void summarize(Plan& plan, std::span<const int64_t> lengths, const Workload& workload) {
  const auto dp = static_cast<size_t>(plan.dp_size);
  const auto steps = static_cast<size_t>(plan.optimizer_steps);
  Stats stats;
  stats.tokens.assign(dp, std::vector<int64_t>(steps, 0));
  stats.workloads.assign(dp, std::vector<int64_t>(steps, 0));
  stats.packs_per_step.assign(steps, 0);
  stats.min_packs_per_step.assign(steps, 1);
  for (size_t rank = 0; rank < dp; ++rank) {
    for (size_t step = 0; step < steps; ++step) {
      const auto& packs = plan.packs[rank][step];
      stats.packs_per_step[step] = std::max<int64_t>(stats.packs_per_step[step], static_cast<int64_t>(packs.size()));
      if (std::all_of(packs.begin(), packs.end(), [](const Pack& p) { return p.samples.empty(); })) {
        ++stats.empty_rank_steps;
      }
      for (const Pack& pack : packs) {
        // Within the lengths' and workloads' totals, which the planners check.
        for (int64_t sample : pack.samples) {
          stats.tokens[rank][step] += lengths[sample];
          stats.workloads[rank][step] += workload.cost(lengths[sample]);
        }
        stats.real_tokens = add_to(stats.real_tokens, pack.tokens, "real_tokens");
        stats.padding_tokens = add_to(stats.padding_tokens, pack.padding, "padding_tokens");
        stats.padding_packs += pack.samples.empty();
        stats.max_pack_tokens = std::max(stats.max_pack_tokens, pack.tokens);
        stats.packs_over_cap += pack.tokens > plan.pack_max_length;
      }
      stats.min_packs_per_step[step] =
          std::max(stats.min_packs_per_step[step], ceil_div(stats.tokens[rank][step], plan.pack_max_length));
    }
  }
  for (size_t step = 0; step < steps; ++step) {
    stats.token_spread.push_back(spread_of(stats.tokens, step));
    stats.workload_spread.push_back(spread_of(stats.workloads, step));
  }
  const int64_t all = add_to(stats.real_tokens, stats.padding_tokens, "padding_tokens + real_tokens");
  stats.padding_ratio = all > 0 ? static_cast<double>(stats.padding_tokens) / static_cast<double>(all) : 0.0;
  plan.stats = std::move(stats);
}

}  // namespace seqflow::pack::detail
