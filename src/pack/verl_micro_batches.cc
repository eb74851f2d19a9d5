// verl's rearrange_micro_batches planned by seqflow: verl's counts and split
// where they fit the cap, the micro-batch planner's count where they do not.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "common/checked_math.h"
#include "pack/bin_packing.h"
#include "pack/halve_to_count.h"
#include "seqflow/balance.h"
#include "seqflow/error.h"
#include "seqflow/pack.h"

namespace seqflow::pack {

namespace {

using Parts = std::vector<std::vector<int64_t>>;

// The units verl plans: runs of force_group_size samples, with their tokens
// and their summed verl workloads (24576 * L + L * L per sample).
struct Groups {
  std::vector<int64_t> tokens;
  std::vector<int64_t> costs;
};

void require_at_least(const char* name, int64_t value, int64_t minimum) {
  if (value < minimum) {
    throw_invalid(std::string(name) + " must be >= " + std::to_string(minimum) + ", got " + std::to_string(value));
  }
}

void require_at_most(const char* name, int64_t value, int64_t most) {
  if (value > most) {
    throw_invalid(std::string(name) + " must be at most " + std::to_string(most) + ", got " + std::to_string(value));
  }
}

Groups groups_of(std::span<const int64_t> lengths, const VerlMicroBatchOptions& options) {
  require_at_least("max_token_len", options.max_token_len, 1);
  require_at_least("force_group_size", options.force_group_size, 1);
  require_at_least("min_num_micro_batch", options.min_count, 0);
  require_at_least("num_batches_divided_by", options.count_multiple, 1);
  require_at_most("min_num_micro_batch", options.min_count, kMaxPlanLists);
  require_at_most("num_batches_divided_by", options.count_multiple, kMaxPlanLists);
  const auto n = static_cast<int64_t>(lengths.size());
  if (n == 0) throw_invalid("lengths: the batch is empty: there is nothing to split into micro-batches");
  if (n % options.force_group_size != 0) {
    throw_invalid("batch size " + std::to_string(n) + " must be a multiple of force_group_size (" +
                  std::to_string(options.force_group_size) + ")");
  }
  const auto size = static_cast<size_t>(options.force_group_size);
  Groups groups;
  int64_t total_tokens = 0;
  int64_t total_cost = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t length = lengths[i];
    if (length < 0) throw_invalid("lengths[" + std::to_string(i) + "] = " + std::to_string(length) + " is negative");
    auto linear = checked_mul(24576, length);
    auto square = checked_mul(length, length);
    auto cost = linear && square ? checked_add(*linear, *square) : std::nullopt;
    auto tokens = checked_add(total_tokens, length);
    auto costs = cost ? checked_add(total_cost, *cost) : std::nullopt;
    if (!tokens || !costs) {
      throw_invalid("lengths[" + std::to_string(i) + "] = " + std::to_string(length) +
                    ": the batch's tokens or workload overflow int64");
    }
    total_tokens = *tokens;
    total_cost = *costs;
    if (i % size == 0) {
      groups.tokens.push_back(0);
      groups.costs.push_back(0);
    }
    groups.tokens.back() += length;
    groups.costs.back() += *cost;
  }
  return groups;
}

int64_t round_up(int64_t value, int64_t multiple) { return detail::ceil_div(value, multiple) * multiple; }

// The counts verl tries before the planner's: [first, end) every `step`.
struct Candidates {
  int64_t first = 0;
  int64_t end = 0;
  int64_t step = 1;

  int64_t size() const { return (end - first) / step; }
  int64_t at(int64_t j) const { return first + j * step; }
};

// `agreed` comes from other ranks: checked against this rank's own groups.
Candidates candidates_of(const Groups& groups, const VerlMicroBatchOptions& options,
                         const VerlMicroBatchNeeds& agreed) {
  const auto own_groups = static_cast<int64_t>(groups.tokens.size());
  const int64_t own_longest = *std::max_element(groups.tokens.begin(), groups.tokens.end());
  require_at_least("agreed lower", agreed.lower, 1);
  require_at_most("agreed lower", agreed.lower, kMaxPlanLists);
  require_at_least("agreed planned", agreed.planned, 0);
  require_at_most("agreed planned", agreed.planned, kMaxPlanLists);
  require_at_least("agreed groups", agreed.groups, 1);
  require_at_most("agreed groups (the fewest of any rank)", agreed.groups, own_groups);
  require_at_least("agreed longest (the longest of any rank)", agreed.longest, own_longest);
  if (agreed.longest > options.max_token_len) {
    throw_invalid("max_token_len (" + std::to_string(options.max_token_len) +
                  ") is below a sample (or force_group_size group) of " + std::to_string(agreed.longest) +
                  " tokens, which cannot be split; raise max_token_len");
  }
  const int64_t step = options.count_multiple;
  const int64_t first = round_up(agreed.lower, step);
  const int64_t end = agreed.planned <= first ? first : first + round_up(agreed.planned - first, step);
  return {first, end, step};
}

// verl's split at `count`, if it fits the cap here.
std::optional<Parts> verl_split(const Groups& groups, const VerlMicroBatchOptions& options, int64_t count) {
  if (count > static_cast<int64_t>(groups.tokens.size())) return std::nullopt;
  Parts parts = balance::get_seqlen_balanced_partitions(groups.costs, count, false);
  for (const auto& part : parts) {
    int64_t tokens = 0;
    for (int64_t group : part) tokens += groups.tokens[static_cast<size_t>(group)];
    if (tokens > options.max_token_len) return std::nullopt;
  }
  return parts;
}

Parts planner_parts(const Groups& groups, int64_t max_token_len) {
  MicroBatchOptions planner;
  planner.workload = Workload::verl();
  planner.order = MicroBatchOrder::kNone;
  return std::move(micro_batches(groups.tokens, max_token_len, planner).batches[0]);
}

// verl's use_dynamic_bsz_balance order: by (workload, first group), heaviest
// first, then the heaviest in the middle and the lightest at both ends.
Parts in_verl_order(Parts parts, const Groups& groups) {
  std::vector<std::pair<int64_t, int64_t>> keys;  // (workload, first group) per part
  for (const auto& part : parts) {
    int64_t cost = 0;
    for (int64_t group : part) cost += groups.costs[static_cast<size_t>(group)];
    keys.emplace_back(cost, part.front());
  }
  std::vector<size_t> ranked(parts.size());
  for (size_t p = 0; p < ranked.size(); ++p) ranked[p] = p;
  std::sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) { return keys[a] > keys[b]; });
  std::vector<size_t> order;  // ranked[0::2] reversed, then ranked[1::2]
  for (size_t r = 0; r < ranked.size(); r += 2) order.push_back(ranked[r]);
  std::reverse(order.begin(), order.end());
  for (size_t r = 1; r < ranked.size(); r += 2) order.push_back(ranked[r]);
  Parts out;
  for (size_t p : order) out.push_back(std::move(parts[p]));
  return out;
}

// The plan at `count`: `split` (verl's, if it fit), else the planner's plan
// halved (`planned`, or planned again when not at hand).
Parts finish(const Groups& groups, const VerlMicroBatchOptions& options, const VerlMicroBatchNeeds& agreed,
             int64_t count, std::optional<Parts> split, std::optional<Parts> planned) {
  if (count > agreed.groups) {
    throw_invalid(std::to_string(count) +
                  " micro-batches are needed (min_num_micro_batch, num_batches_divided_by and the other data-parallel "
                  "ranks agree on it), but a rank has only " +
                  std::to_string(agreed.groups) + " samples (force_group_size groups) to fill them");
  }
  if (!split) split = verl_split(groups, options, count);
  // verl's split at a count above the planner's practically always fits; the
  // planner's plan, halved as needed, fits whatever the input.
  if (!split && !planned) planned = planner_parts(groups, options.max_token_len);
  Parts parts = split ? std::move(*split) : detail::halve_to_count(std::move(*planned), count, groups.costs);
  for (auto& part : parts) std::sort(part.begin(), part.end());
  if (options.balance_order) parts = in_verl_order(std::move(parts), groups);
  const int64_t size = options.force_group_size;
  for (auto& part : parts) {
    std::vector<int64_t> rows;
    rows.reserve(part.size() * static_cast<size_t>(size));
    for (int64_t group : part) {
      for (int64_t offset = 0; offset < size; ++offset) rows.push_back(group * size + offset);
    }
    part = std::move(rows);
  }
  return parts;
}

// This rank's needs, and the planner's plan they count (none when a group
// exceeds the cap).
std::pair<VerlMicroBatchNeeds, std::optional<Parts>> needs_of(const Groups& groups,
                                                              const VerlMicroBatchOptions& options) {
  VerlMicroBatchNeeds needs;
  std::optional<Parts> planned;
  needs.groups = static_cast<int64_t>(groups.tokens.size());
  int64_t total = 0;
  for (int64_t tokens : groups.tokens) total += tokens;  // checked in groups_of
  needs.lower =
      std::max({std::min(needs.groups, detail::ceil_div(total, options.max_token_len)), options.min_count, int64_t{1}});
  needs.longest = *std::max_element(groups.tokens.begin(), groups.tokens.end());
  if (needs.longest <= options.max_token_len) {
    planned = planner_parts(groups, options.max_token_len);
    needs.planned = static_cast<int64_t>(planned->size());
  }
  return {needs, std::move(planned)};
}

}  // namespace

VerlMicroBatchNeeds verl_micro_batch_needs(std::span<const int64_t> lengths, const VerlMicroBatchOptions& options) {
  return needs_of(groups_of(lengths, options), options).first;
}

std::vector<int64_t> verl_split_fits(std::span<const int64_t> lengths, const VerlMicroBatchOptions& options,
                                     const VerlMicroBatchNeeds& agreed) {
  const Groups groups = groups_of(lengths, options);
  const Candidates candidates = candidates_of(groups, options, agreed);
  std::vector<int64_t> fits;
  for (int64_t j = 0; j < candidates.size(); ++j) {
    fits.push_back(verl_split(groups, options, candidates.at(j)) ? 1 : 0);
  }
  return fits;
}

Parts verl_micro_batches(std::span<const int64_t> lengths, const VerlMicroBatchOptions& options,
                         const VerlMicroBatchNeeds& agreed, std::span<const int64_t> agreed_fits) {
  const Groups groups = groups_of(lengths, options);
  const Candidates candidates = candidates_of(groups, options, agreed);
  if (static_cast<int64_t>(agreed_fits.size()) != candidates.size()) {
    throw_invalid("agreed_fits has " + std::to_string(agreed_fits.size()) + " entries, but " +
                  std::to_string(candidates.size()) + " counts are tried (one entry per count)");
  }
  for (size_t j = 0; j < agreed_fits.size(); ++j) {
    if (agreed_fits[j] != 0 && agreed_fits[j] != 1) {
      throw_invalid("agreed_fits[" + std::to_string(j) + "] = " + std::to_string(agreed_fits[j]) + " is not 0 or 1");
    }
    if (agreed_fits[j] == 0) continue;
    const int64_t count = candidates.at(static_cast<int64_t>(j));
    auto split = verl_split(groups, options, count);
    if (!split) {
      throw_invalid("agreed_fits[" + std::to_string(j) + "] = 1, but verl's split into " + std::to_string(count) +
                    " micro-batches breaks max_token_len on this rank");
    }
    return finish(groups, options, agreed, count, std::move(split), std::nullopt);
  }
  return finish(groups, options, agreed, candidates.end, std::nullopt, std::nullopt);
}

Parts verl_micro_batches(std::span<const int64_t> lengths, const VerlMicroBatchOptions& options) {
  const Groups groups = groups_of(lengths, options);
  auto [needs, planned] = needs_of(groups, options);
  const Candidates candidates = candidates_of(groups, options, needs);
  // Every count is split, as verl_split_fits does for ranks that agree: a
  // split that fails fails alone and synchronised alike.
  std::optional<int64_t> chosen;
  std::optional<Parts> chosen_split;
  for (int64_t j = 0; j < candidates.size(); ++j) {
    auto split = verl_split(groups, options, candidates.at(j));
    if (split && !chosen) {
      chosen = candidates.at(j);
      chosen_split = std::move(split);
    }
  }
  return finish(groups, options, needs, chosen.value_or(candidates.end), std::move(chosen_split), std::move(planned));
}

}  // namespace seqflow::pack
