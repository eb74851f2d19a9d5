// seqflow::pack::plan: samples -> steps -> ranks -> packs.
//
// 1. Lay samples out over (step, rank), groups whole, two ways:
//    - balanced steps: split over optimizer steps with group counts differing
//      by at most one (a step is a mini-batch of about the same number of
//      prompts, as trainers expect) and even workloads;
//    - steps by size: groups sorted by workload cut into consecutive runs of
//      the same counts, so a step holds groups of similar size;
//    then each step over ranks, any count per rank (how a step spreads over
//    ranks does not change the gradient, so only workload matters). Parts go
//    to ranks heaviest first onto the rank with the least workload so far,
//    which also evens out the ranks' totals over the steps. The plan keeps
//    balanced steps unless steps by size cut what ranks wait for (the sum
//    over steps of the heaviest rank) by kUnevenStepsGain: that happens when
//    a (rank, step) holds about one group.
// 2. Pack each (rank, step) into P bins under the token cap, P being the same
//    for every rank of the step and as small as the packer can make it
//    (starting from the lower bound max over ranks of ceil(tokens / cap)).
//    Bins are balanced, so packs in the same slot have similar lengths across
//    ranks; for "step_max" padding, bins filled in turn are used instead
//    where they line up better.
// 3. Pad, and describe.
#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>

#include "common/checked_math.h"
#include "pack/bin_packing.h"
#include "pack/limits.h"
#include "pack/plan_progress.h"
#include "pack/plan_stats.h"
#include "seqflow/balance.h"
#include "seqflow/error.h"
#include "seqflow/pack.h"

namespace seqflow::pack {

namespace {

// Steps of uneven workload (steps by size) are chosen only when they cut the
// ranks' waiting by at least this fraction.
constexpr double kUnevenStepsGain = 0.01;

void validate(std::span<const int64_t> lengths, const Options& options) {
  detail::require_plan_shape(options.dp_size, options.optimizer_steps, options.pack_max_length, options.pad_chunk);
  if (!options.groups.empty() && options.groups.size() != lengths.size()) {
    throw_invalid("groups has " + std::to_string(options.groups.size()) + " entries but lengths has " +
                  std::to_string(lengths.size()) + "; give one group id per sample");
  }
  int64_t total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const std::string where = "lengths[" + std::to_string(i) + "] = " + std::to_string(lengths[i]);
    if (lengths[i] < 0) throw_invalid(where + " is negative; lengths must be >= 0");
    if (lengths[i] > options.pack_max_length) {
      throw_invalid(where + " exceeds pack_max_length (" + std::to_string(options.pack_max_length) + "): sample " +
                    std::to_string(i) + " fits in no pack; raise pack_max_length or truncate the sample");
    }
    auto sum = checked_add(total, lengths[i]);
    if (!sum) throw_invalid("lengths: the total number of tokens overflows int64");
    total = *sum;
  }
}

// Group (unit) id per sample, numbered by first appearance; empty when every
// sample is its own unit.
std::vector<int64_t> units_of(std::span<const int64_t> groups) {
  std::vector<int64_t> unit_of(groups.size());
  std::unordered_map<int64_t, int64_t> unit_of_group;
  unit_of_group.reserve(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    auto [it, inserted] = unit_of_group.try_emplace(groups[i], static_cast<int64_t>(unit_of_group.size()));
    unit_of[i] = it->second;
  }
  return unit_of;
}

class Planner {
 public:
  Planner(std::span<const int64_t> lengths, const Options& options)
      : lengths_(lengths),
        options_(options),
        costs_(options.workload.costs(lengths, "lengths")),
        unit_of_(units_of(options.groups)) {}

  Plan run() {
    Plan out;
    out.lengths.assign(lengths_.begin(), lengths_.end());
    out.dp_size = options_.dp_size;
    out.optimizer_steps = options_.optimizer_steps;
    out.pack_max_length = options_.pack_max_length;
    out.pad_to = options_.pad_to;
    out.pad_chunk = options_.pad_chunk;
    out.packs.assign(static_cast<size_t>(options_.dp_size),
                     std::vector<std::vector<Pack>>(static_cast<size_t>(options_.optimizer_steps)));
    std::vector<int64_t> all(lengths_.size());
    std::iota(all.begin(), all.end(), 0);
    const int64_t total = options_.workload.total(costs_, "lengths");
    const std::vector<int64_t> tie_order = seeded_rank_order();
    Layout layout = steps_first(all, tie_order);
    // Steps of uneven workload must buy at least kUnevenStepsGain. No layout
    // waits less than total / dp_size, so when balanced steps come close
    // enough to that, steps by size need not be tried.
    const double ideal = static_cast<double>(total) / static_cast<double>(options_.dp_size);
    const auto threshold = static_cast<double>(slowest_rank_total(layout)) * (1.0 - kUnevenStepsGain);
    if (ideal < threshold) {
      Layout by_size = steps_by_size(all, tie_order);
      if (static_cast<double>(slowest_rank_total(by_size)) < threshold) {
        layout = std::move(by_size);
        steps_by_size_ = true;
      }
    }
    detail::PhaseProgress packing(options_.progress, PlanPhase::kPacking, static_cast<int64_t>(lengths_.size()));
    for (size_t step = 0; step < layout.size(); ++step) {
      pack_step(out, step, layout[step]);
      packing.advance(samples_in(layout[step]));
    }
    detail::apply_padding(out);
    detail::summarize(out, lengths_, options_.workload);
    add_notes(out);
    return out;
  }

 private:
  int64_t unit(int64_t sample) const { return unit_of_.empty() ? sample : unit_of_[sample]; }

  int64_t workload_of(const std::vector<int64_t>& samples) const {
    int64_t sum = 0;
    for (int64_t s : samples) sum += costs_[s];
    return sum;
  }

  // Splits `samples` into k parts: groups whole, group counts as `cardinality`
  // says, workloads even. With fewer groups than parts, each group gets a part
  // of its own (heaviest first) and the other parts stay empty.
  // Samples per (step, rank), each list ascending.
  using Layout = std::vector<std::vector<std::vector<int64_t>>>;

  // Steps first (balanced group counts, even workloads), then each step over
  // ranks. Best when every (rank, step) holds several groups.
  Layout steps_first(const std::vector<int64_t>& all, const std::vector<int64_t>& tie_order) const {
    detail::PhaseProgress progress(options_.progress, PlanPhase::kStepsFirst, static_cast<int64_t>(all.size()));
    Layout layout;
    std::vector<int64_t> rank_workload(static_cast<size_t>(options_.dp_size), 0);
    for (const auto& step : split(all, options_.optimizer_steps, balance::Cardinality::kBalanced)) {
      layout.push_back(
          assign_to_ranks(split(step, options_.dp_size, balance::Cardinality::kFree), rank_workload, tie_order));
      progress.advance(static_cast<int64_t>(step.size()));
    }
    return layout;
  }

  // Steps by size: groups sorted by workload, heaviest first, cut into
  // consecutive runs of balanced counts, one per step; then each step over
  // ranks. A step then holds groups of similar workload, which ranks can
  // share evenly even when a (rank, step) gets about one group, where
  // balanced steps would pair large and small groups and ranks would wait.
  Layout steps_by_size(const std::vector<int64_t>& all, const std::vector<int64_t>& tie_order) const {
    detail::PhaseProgress progress(options_.progress, PlanPhase::kStepsBySize, static_cast<int64_t>(all.size()));
    auto groups = groups_in(all);
    const auto steps = static_cast<size_t>(options_.optimizer_steps);
    Layout layout;
    std::vector<int64_t> rank_workload(static_cast<size_t>(options_.dp_size), 0);
    for (size_t step = 0; step < steps; ++step) {
      std::vector<int64_t> samples;
      for (size_t g = step * groups.size() / steps; g < (step + 1) * groups.size() / steps; ++g) {
        samples.insert(samples.end(), groups[g].begin(), groups[g].end());
      }
      layout.push_back(
          assign_to_ranks(split(samples, options_.dp_size, balance::Cardinality::kFree), rank_workload, tie_order));
      progress.advance(static_cast<int64_t>(samples.size()));
    }
    return layout;
  }

  // The groups among `samples`, heaviest first (ties by first appearance).
  std::vector<std::vector<int64_t>> groups_in(const std::vector<int64_t>& samples) const {
    std::unordered_map<int64_t, size_t> index_of_unit;
    std::vector<std::vector<int64_t>> groups;
    for (int64_t sample : samples) {
      auto [it, inserted] = index_of_unit.try_emplace(unit(sample), groups.size());
      if (inserted) groups.emplace_back();
      groups[it->second].push_back(sample);
    }
    std::vector<int64_t> loads(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) loads[g] = workload_of(groups[g]);
    std::vector<size_t> order(groups.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return loads[a] > loads[b]; });
    std::vector<std::vector<int64_t>> sorted;
    sorted.reserve(groups.size());
    for (size_t g : order) sorted.push_back(std::move(groups[g]));
    return sorted;
  }

  static int64_t samples_in(const std::vector<std::vector<int64_t>>& step) {
    int64_t count = 0;
    for (const auto& rank : step) count += static_cast<int64_t>(rank.size());
    return count;
  }

  // What the ranks wait for: the sum over steps of the heaviest rank's workload.
  int64_t slowest_rank_total(const Layout& layout) const {
    int64_t total = 0;
    for (const auto& step : layout) {
      int64_t slowest = 0;
      for (const auto& rank : step) slowest = std::max(slowest, workload_of(rank));
      total += slowest;
    }
    return total;
  }

  std::vector<std::vector<int64_t>> split(const std::vector<int64_t>& samples, int64_t k,
                                          balance::Cardinality cardinality) const {
    std::vector<std::vector<int64_t>> parts(static_cast<size_t>(k));
    if (samples.empty()) return parts;
    std::vector<int64_t> sub_lengths(samples.size());
    std::vector<int64_t> sub_units(samples.size());
    for (size_t i = 0; i < samples.size(); ++i) {
      sub_lengths[i] = lengths_[samples[i]];
      sub_units[i] = unit(samples[i]);
    }
    std::vector<int64_t> distinct = sub_units;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    if (static_cast<int64_t>(distinct.size()) >= k) {
      balance::Options options;
      options.cardinality = cardinality;
      options.workload = options_.workload;
      if (!unit_of_.empty()) options.groups = sub_units;
      auto result = balance::partition(sub_lengths, k, options);
      for (size_t p = 0; p < result.parts.size(); ++p) {
        for (int64_t local : result.parts[p]) parts[p].push_back(samples[local]);
      }
      return parts;
    }
    // Fewer groups than parts: one group per part.
    auto groups = groups_in(samples);
    for (size_t p = 0; p < groups.size(); ++p) parts[p] = std::move(groups[p]);
    return parts;
  }

  // Rank order for breaking ties between ranks of equal workload: identity for
  // seed 0, else a permutation from a portable generator (splitmix64), so that
  // plans are the same on every machine.
  std::vector<int64_t> seeded_rank_order() const {
    std::vector<int64_t> order(static_cast<size_t>(options_.dp_size));
    std::iota(order.begin(), order.end(), 0);
    if (options_.seed == 0) return order;
    uint64_t state = options_.seed;
    auto next = [&state] {
      uint64_t z = (state += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      return z ^ (z >> 31);
    };
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[next() % i]);
    std::vector<int64_t> priority(order.size());
    for (size_t i = 0; i < order.size(); ++i) priority[order[i]] = static_cast<int64_t>(i);
    return priority;
  }

  // The heaviest part goes to the rank with the least workload so far.
  std::vector<std::vector<int64_t>> assign_to_ranks(std::vector<std::vector<int64_t>> parts,
                                                    std::vector<int64_t>& rank_workload,
                                                    const std::vector<int64_t>& tie_order) const {
    const size_t dp = parts.size();
    std::vector<int64_t> part_load(dp);
    for (size_t p = 0; p < dp; ++p) part_load[p] = workload_of(parts[p]);
    std::vector<size_t> part_order(dp);
    std::vector<size_t> rank_order(dp);
    std::iota(part_order.begin(), part_order.end(), 0);
    std::iota(rank_order.begin(), rank_order.end(), 0);
    std::stable_sort(part_order.begin(), part_order.end(),
                     [&](size_t a, size_t b) { return part_load[a] > part_load[b]; });
    std::sort(rank_order.begin(), rank_order.end(), [&](size_t a, size_t b) {
      if (rank_workload[a] != rank_workload[b]) return rank_workload[a] < rank_workload[b];
      return tie_order[a] < tie_order[b];
    });
    std::vector<std::vector<int64_t>> per_rank(dp);
    for (size_t i = 0; i < dp; ++i) {
      const size_t rank = rank_order[i];
      per_rank[rank] = std::move(parts[part_order[i]]);
      std::sort(per_rank[rank].begin(), per_rank[rank].end());
      rank_workload[rank] += part_load[part_order[i]];
    }
    return per_rank;
  }

  // Packs every rank's samples of one step into the same, smallest number of
  // bins the packer manages under the cap.
  void pack_step(Plan& out, size_t step, const std::vector<std::vector<int64_t>>& per_rank) {
    const int64_t cap = options_.pack_max_length;
    std::vector<std::vector<int64_t>> tokens(per_rank.size());
    int64_t bins = 1;
    for (size_t rank = 0; rank < per_rank.size(); ++rank) {
      for (int64_t s : per_rank[rank]) tokens[rank].push_back(lengths_[s]);
      const int64_t total = std::accumulate(tokens[rank].begin(), tokens[rank].end(), int64_t{0});
      bins = std::max(bins, detail::ceil_div(total, cap));
    }
    auto assignments = detail::fit_all_into_bins(tokens, bins, 1, cap, options_.workload);
    if (options_.pad_to == PadTo::kStepMax && bins > 1) {
      // Slots are padded to their longest pack across ranks. Balanced packs
      // put one rank's long sample against others' average packs; packs
      // filled in turn (best-fit decreasing) line up as full, full, ...,
      // remainder on every rank. Keep whichever pads less.
      std::vector<std::vector<int64_t>> filled;
      for (const auto& list : tokens) {
        auto tight = detail::best_fit_decreasing(list, cap, bins);
        if (!tight) break;
        filled.push_back(std::move(tight->assignment));
      }
      if (filled.size() == tokens.size() &&
          slot_maxima_total(tokens, filled, bins) < slot_maxima_total(tokens, assignments, bins)) {
        assignments = std::move(filled);
      }
    }
    const auto step_packs = checked_mul(bins, static_cast<int64_t>(per_rank.size()));
    const auto plan_packs = step_packs ? checked_add(packs_so_far_, *step_packs) : std::nullopt;
    detail::require_plan_lists(plan_packs,
                               "packs up to step " + std::to_string(step) + " (step " + std::to_string(step) +
                                   " needs " + std::to_string(bins) + " per rank on " +
                                   std::to_string(per_rank.size()) + " ranks)",
                               "raise pack_max_length or plan fewer samples at a time");
    packs_so_far_ = *plan_packs;
    for (size_t rank = 0; rank < per_rank.size(); ++rank) {
      auto& packs = out.packs[rank][step];
      packs.assign(static_cast<size_t>(bins), Pack{});
      for (size_t i = 0; i < per_rank[rank].size(); ++i) {
        Pack& pack = packs[assignments[rank][i]];
        pack.samples.push_back(per_rank[rank][i]);
        pack.tokens += tokens[rank][i];
      }
      // Longest first in every rank, so that slot j holds similar packs
      // across ranks; padding packs last.
      std::stable_sort(packs.begin(), packs.end(), [](const Pack& a, const Pack& b) {
        if (a.tokens != b.tokens) return a.tokens > b.tokens;
        if (a.samples.empty() != b.samples.empty()) return b.samples.empty();
        return !a.samples.empty() && a.samples.front() < b.samples.front();
      });
    }
  }

  // The padded length of one rank's packs under step_max padding: the sum
  // over slots of the longest pack in the slot (packs sorted longest first).
  static int64_t slot_maxima_total(const std::vector<std::vector<int64_t>>& tokens,
                                   const std::vector<std::vector<int64_t>>& assignments, int64_t bins) {
    std::vector<int64_t> slot_max(static_cast<size_t>(bins), 0);
    for (size_t rank = 0; rank < tokens.size(); ++rank) {
      std::vector<int64_t> loads(static_cast<size_t>(bins), 0);
      for (size_t i = 0; i < tokens[rank].size(); ++i) loads[assignments[rank][i]] += tokens[rank][i];
      std::sort(loads.begin(), loads.end(), std::greater<>());
      for (size_t j = 0; j < loads.size(); ++j) slot_max[j] = std::max(slot_max[j], loads[j]);
    }
    return std::accumulate(slot_max.begin(), slot_max.end(), int64_t{0});
  }

  void add_notes(Plan& out) const {
    const Stats& stats = out.stats;
    const int64_t rank_steps = out.dp_size * out.optimizer_steps;
    if (stats.empty_rank_steps > 0) {
      int64_t units = unit_of_.empty() ? static_cast<int64_t>(lengths_.size()) : 0;
      if (!unit_of_.empty()) units = *std::max_element(unit_of_.begin(), unit_of_.end()) + 1;
      out.notes.push_back(std::to_string(stats.empty_rank_steps) + " of " + std::to_string(rank_steps) +
                          " (rank, step) pairs hold no samples (" + std::to_string(units) +
                          (unit_of_.empty() ? " samples" : " groups") + " for " + std::to_string(out.dp_size) +
                          " ranks x " + std::to_string(out.optimizer_steps) +
                          " steps); they run padding packs only, so every rank still takes " +
                          std::to_string(out.optimizer_steps) + " optimizer steps");
    }
    if (steps_by_size_) {
      out.notes.push_back(
          "few groups per (rank, step): steps hold groups of similar workload (heaviest groups "
          "in step 0), which keeps ranks even within a step; steps differ in workload");
    }
    for (size_t step = 0; step < stats.packs_per_step.size(); ++step) {
      if (stats.packs_per_step[step] > stats.min_packs_per_step[step]) {
        out.notes.push_back("step " + std::to_string(step) + " has " + std::to_string(stats.packs_per_step[step]) +
                            " packs per rank where token counts alone would allow " +
                            std::to_string(stats.min_packs_per_step[step]) +
                            ": its samples do not pack tighter under the cap");
      }
    }
  }

  std::span<const int64_t> lengths_;
  const Options& options_;
  bool steps_by_size_ = false;  // steps_by_size won
  int64_t packs_so_far_ = 0;    // over ranks and the steps packed so far
  std::vector<int64_t> costs_;
  std::vector<int64_t> unit_of_;
};

}  // namespace

PadTo parse_pad_to(std::string_view name) {
  if (name == "cap") return PadTo::kCap;
  if (name == "step_max") return PadTo::kStepMax;
  if (name == "none") return PadTo::kNone;
  throw_invalid("pad_to: unknown value '" + std::string(name) + "'; expected cap, step_max or none");
}

std::string_view to_string(PadTo pad_to) {
  switch (pad_to) {
    case PadTo::kCap:
      return "cap";
    case PadTo::kStepMax:
      return "step_max";
    case PadTo::kNone:
      return "none";
  }
  return "?";
}

std::string_view to_string(PlanPhase phase) {
  switch (phase) {
    case PlanPhase::kStepsFirst:
      return "steps_first";
    case PlanPhase::kStepsBySize:
      return "steps_by_size";
    case PlanPhase::kPacking:
      return "packing";
  }
  return "?";
}

Plan plan(std::span<const int64_t> lengths, const Options& options) {
  validate(lengths, options);
  return Planner(lengths, options).run();
}

const Pack& pack_at(const Plan& plan, int64_t rank, int64_t step, int64_t slot) {
  detail::require_index("rank", rank, static_cast<int64_t>(plan.packs.size()));
  const auto& steps = plan.packs[static_cast<size_t>(rank)];
  detail::require_index("step", step, static_cast<int64_t>(steps.size()));
  const auto& packs = steps[static_cast<size_t>(step)];
  detail::require_index("slot", slot, static_cast<int64_t>(packs.size()));
  return packs[static_cast<size_t>(slot)];
}

std::vector<int64_t> padding_sequences(int64_t padding, int64_t pad_chunk) {
  detail::require_positive("pad_chunk", pad_chunk);
  if (padding < 0) throw_invalid("padding must be >= 0, got " + std::to_string(padding));
  detail::require_within_pack("padding", padding);
  detail::require_padding_sequences("padding", padding, pad_chunk);
  std::vector<int64_t> out(static_cast<size_t>(padding / pad_chunk), pad_chunk);
  if (padding % pad_chunk != 0) out.push_back(padding % pad_chunk);
  return out;
}

}  // namespace seqflow::pack
