// verl 0.9.1's eviction / refill matrix (replay_buffer.py):
//   sync:  staleness a no-op; DAPO evicts k and refills 2k within the
//          in-flight bound, in gen_batch_size steps, then drains the
//          in-flight prompts and discards the surplus; failed groups stay
//          sampleable unless refill_failed_groups (then those without any
//          trajectory are evicted and refilled k).
//   async: stale (drop), DAPO-filtered and failed groups evicted, refilled k;
//          `wait` holds sampling while an in-flight prompt is at the threshold.
// And seqflow's staleness by policy version (async): a group whose start
// version lags the current one by more than max_staleness_versions is
// stale, dropped or waited for as a stale group by global_steps.
#include "common/checked_math.h"
#include "core/replay_selection.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace seqflow::core {
namespace {

int64_t span_of(const ReplayPrompt& prompt, int64_t global_steps) { return global_steps - prompt.global_steps + 1; }

// Whether a group that started at `start` lags the current policy version too far.
bool stale_by_version(const ReplayOptions& options, std::optional<int64_t> start, int64_t policy_version) {
  return options.max_staleness_versions && start && policy_version - *start > *options.max_staleness_versions;
}

// The groups a pass evicts, each reason counted as verl counts it (a group
// may have several reasons; it is evicted and refilled once).
struct EvictionReasons {
  std::unordered_set<std::string_view> stale, stale_versions, filtered, failed;
  bool any(std::string_view uid) const {
    return stale.count(uid) + stale_versions.count(uid) + filtered.count(uid) + failed.count(uid) > 0;
  }
};

EvictionReasons eviction_reasons(const ReplayRequest& request, const ReplayGroups& groups,
                                 const std::vector<std::pair<std::string, double>>& filtered, int64_t policy_version) {
  EvictionReasons reasons;
  const ReplayOptions& options = request.options;
  if (!options.evict) return reasons;
  for (const auto& [uid, value] : filtered) reasons.filtered.insert(uid);
  const bool async = options.mode == ReplayMode::kAsync;
  const bool drop_stale = async && options.strategy == StalenessStrategy::kDrop;
  for (const ReplayPrompt& prompt : groups.terminal()) {
    const bool finished = prompt.status == PromptStatus::kFinished;
    if (drop_stale && finished && options.max_off_policy_threshold &&
        span_of(prompt, request.global_steps) > *options.max_off_policy_threshold) {
      reasons.stale.insert(prompt.uid);
    }
    if (drop_stale && finished && stale_by_version(options, prompt.start_version, policy_version)) {
      reasons.stale_versions.insert(prompt.uid);
    }
    if (prompt.status != PromptStatus::kFailure) continue;
    if (async ||
        (options.refill_failed_groups && groups.served_trajectories(prompt.uid, options.member_status).empty())) {
      reasons.failed.insert(prompt.uid);
    }
  }
  return reasons;
}

ReplayEvictions count_evictions(const ReplayRequest& request, const ReplayGroups& groups,
                                const EvictionReasons& reasons,
                                const std::vector<std::pair<std::string, double>>& filtered, int64_t policy_version) {
  ReplayEvictions counted;
  for (const ReplayPrompt& prompt : groups.terminal()) {
    if (reasons.stale_versions.count(prompt.uid) > 0) {
      counted.stale_versions_age_max = std::max(counted.stale_versions_age_max, policy_version - *prompt.start_version);
      ++counted.stale_versions;
    }
    if (reasons.stale.count(prompt.uid) == 0) continue;
    const int64_t span = span_of(prompt, request.global_steps);
    counted.stale_span_max = counted.stale > 0 ? std::max(counted.stale_span_max, span) : span;
    counted.stale_span_min = counted.stale > 0 ? std::min(counted.stale_span_min, span) : span;
    // Saturates: spans are bounded (kMaxReplayCount), their sum over many groups need not be.
    counted.stale_span_sum = checked_add(counted.stale_span_sum, span).value_or(INT64_MAX);
    ++counted.stale;
  }
  ReplayEvictions values;
  for (const auto& [uid, value] : filtered) values.filtered_values.emplace_back(value, 1);
  counted.add(values);
  counted.filtered = static_cast<int64_t>(reasons.filtered.size());
  counted.failed = static_cast<int64_t>(reasons.failed.size());
  return counted;
}

// Oldest step first; equal steps in the prompts' arrival order (verl sorts a
// set stably, so its ties follow the set's hash order).
std::vector<std::string_view> oldest_first(const ReplayGroups& groups, const std::vector<std::string_view>& sampleable,
                                           int64_t batch_size) {
  std::unordered_map<std::string_view, int64_t> steps;
  for (const ReplayPrompt& prompt : groups.terminal()) steps.emplace(prompt.uid, prompt.global_steps);
  std::vector<std::string_view> ordered = sampleable;
  std::stable_sort(ordered.begin(), ordered.end(),
                   [&](std::string_view a, std::string_view b) { return steps.at(a) < steps.at(b); });
  ordered.resize(std::min(ordered.size(), static_cast<size_t>(batch_size)));
  return ordered;
}

// verl's ReplayBuffer.sample, one iteration after its evictions.
void plan_sync(const ReplayRequest& request, const ReplayGroups& groups, const EvictionReasons& reasons,
               int64_t inflight, ReplayPlan& plan) {
  const ReplayOptions& options = request.options;
  const bool filtering = options.evict && options.group_filtering();
  const auto failed = static_cast<int64_t>(reasons.failed.size());
  const bool has_enough = static_cast<int64_t>(plan.sampleable.size()) >= request.batch_size;
  if (!filtering && failed > 0 && !has_enough) {
    plan.refill = failed;
    return;
  }
  ReplayCursor& cursor = plan.cursor;
  if (filtering) {
    if (has_enough) {
      cursor.draining = true;  // no more speculative prompts; wait for those in flight
      cursor.refill_credit = 0;
    } else if (!cursor.draining) {
      cursor.refill_credit += 2 * static_cast<int64_t>(reasons.filtered.size()) + failed;
    }
    if (!cursor.draining && cursor.refill_credit > 0) {
      int64_t dispatch = std::min(cursor.refill_credit, std::max<int64_t>(0, options.max_inflight_prompts - inflight));
      dispatch -= dispatch % options.gen_batch_size;
      if (dispatch > 0) {
        plan.refill = dispatch;
        cursor.refill_credit -= dispatch;
        return;
      }
    }
  }
  if (!has_enough || (filtering && inflight > 0) || request.step != ReplayStep::kSample) return;
  plan.selected = oldest_first(groups, plan.sampleable, request.batch_size);
  plan.ready = true;
  if (!filtering) return;
  // Sync stays bufferless: what was sampleable beyond the batch is discarded.
  const std::unordered_set<std::string_view> chosen(plan.selected.begin(), plan.selected.end());
  for (std::string_view uid : plan.sampleable) {
    if (chosen.count(uid) == 0) plan.evicted.push_back(uid);
  }
  cursor.evictions.surplus += static_cast<int64_t>(plan.sampleable.size() - plan.selected.size());
}

// verl's ReplayBufferAsync.wait_for_sampleable (and sample), one iteration after its evictions.
void plan_async(const ReplayRequest& request, const ReplayGroups& groups, int64_t policy_version, ReplayPlan& plan) {
  if (!plan.evicted.empty()) {
    plan.refill = static_cast<int64_t>(plan.evicted.size());
    return;
  }
  const ReplayOptions& options = request.options;
  if (options.strategy == StalenessStrategy::kWait) {
    const std::optional<int64_t> oldest = groups.oldest_in_flight();
    if (options.max_off_policy_threshold && oldest &&
        request.global_steps - *oldest + 1 >= *options.max_off_policy_threshold) {
      return;
    }
    if (stale_by_version(options, groups.oldest_in_flight_start(), policy_version)) return;
  }
  if (static_cast<int64_t>(plan.sampleable.size()) < request.batch_size) return;
  plan.ready = true;
  if (request.step == ReplayStep::kSample) plan.selected = oldest_first(groups, plan.sampleable, request.batch_size);
}

}  // namespace

ReplayPlan plan_replay_pass(const ReplayRequest& request, const ReplayGroups& groups,
                            const std::vector<std::pair<std::string, double>>& filtered, int64_t policy_version) {
  ReplayPlan plan;
  plan.cursor = request.cursor;
  const EvictionReasons reasons = eviction_reasons(request, groups, filtered, policy_version);
  const int64_t inflight = groups.in_flight();
  for (const ReplayPrompt& prompt : groups.terminal()) {
    if (!reasons.any(prompt.uid)) {
      plan.sampleable.push_back(prompt.uid);
    } else if (request.step != ReplayStep::kCount) {
      plan.evicted.push_back(prompt.uid);
    }
  }
  if (request.step == ReplayStep::kCount) return plan;
  plan.cursor.evictions.add(count_evictions(request, groups, reasons, filtered, policy_version));
  if (request.options.mode == ReplayMode::kSync) {
    plan_sync(request, groups, reasons, inflight, plan);
  } else {
    plan_async(request, groups, policy_version, plan);
  }
  return plan;
}

}  // namespace seqflow::core
