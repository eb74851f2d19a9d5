// Replay selection's names and the checks of a request, before the lock.
#include <string>

#include "core/name_rule.h"
#include "core/replay_balance.h"
#include "core/replay_selection.h"
#include "seqflow/controller.h"
#include "seqflow/error.h"
#include "seqflow/replay.h"

namespace seqflow {

ReplayMode parse_replay_mode(std::string_view name) {
  if (name == "sync") return ReplayMode::kSync;
  if (name == "async") return ReplayMode::kAsync;
  throw_invalid("mode must be 'sync' or 'async', got '" + std::string(name) + "'");
}

StalenessStrategy parse_staleness_strategy(std::string_view name) {
  if (name == "drop") return StalenessStrategy::kDrop;
  if (name == "wait") return StalenessStrategy::kWait;
  throw_invalid("max_off_policy_strategy must be 'drop' or 'wait', got '" + std::string(name) + "'");
}

ReplayStep parse_replay_step(std::string_view name) {
  if (name == "count") return ReplayStep::kCount;
  if (name == "evict") return ReplayStep::kEvict;
  if (name == "sample") return ReplayStep::kSample;
  throw_invalid("step must be 'count', 'evict' or 'sample', got '" + std::string(name) + "'");
}

const char* replay_step_name(ReplayStep step) {
  switch (step) {
    case ReplayStep::kCount:
      return "count";
    case ReplayStep::kEvict:
      return "evict";
    case ReplayStep::kSample:
      break;
  }
  return "sample";
}

namespace core {
namespace {

void check_at_least(int64_t value, int64_t least, const std::string& parameter, const std::string& why = "") {
  if (value < least) {
    throw_invalid(parameter + " = " + std::to_string(value) + " must be >= " + std::to_string(least) + why);
  }
  if (value > kMaxReplayCount) {
    throw_invalid(parameter + " = " + std::to_string(value) + " must be <= 2^53 (" + std::to_string(kMaxReplayCount) +
                  ")");
  }
}

// A peer sends the cursor back each pass: every count in it bounded, so that the sums stay exact.
void check_evictions(const ReplayEvictions& evictions) {
  check_at_least(evictions.stale, 0, "cursor.evictions.stale");
  check_at_least(evictions.stale_span_sum, 0, "cursor.evictions.stale_span_sum");
  check_at_least(evictions.stale_span_max, 0, "cursor.evictions.stale_span_max");
  check_at_least(evictions.stale_span_min, 0, "cursor.evictions.stale_span_min");
  check_at_least(evictions.filtered, 0, "cursor.evictions.filtered");
  check_at_least(evictions.failed, 0, "cursor.evictions.failed");
  check_at_least(evictions.surplus, 0, "cursor.evictions.surplus");
  check_at_least(evictions.stale_versions, 0, "cursor.evictions.stale_versions");
  check_at_least(evictions.stale_versions_age_max, 0, "cursor.evictions.stale_versions_age_max");
  check_at_least(evictions.left_out_members, 0, "cursor.evictions.left_out_members");
  for (const auto& [value, groups] : evictions.filtered_values) {
    check_at_least(groups, 0, "cursor.evictions.filtered_values groups");
  }
}

}  // namespace

void check_replay_request(const ReplayRequest& request) {
  check_name(request.partition_id, "partition_id");
  const ReplayOptions& options = request.options;
  check_at_least(request.batch_size, request.step == ReplayStep::kSample ? 1 : 0, "batch_size");
  if (options.max_off_policy_threshold) {
    check_at_least(*options.max_off_policy_threshold, 1, "max_off_policy_threshold", " (None: no staleness control)");
  }
  if (options.max_staleness_versions) {
    check_at_least(*options.max_staleness_versions, 0, "max_staleness_versions", " (None: no staleness control)");
  }
  if (options.group_filter_tag) check_name(*options.group_filter_tag, "group_filter_tag");
  if (options.group_filter_metric) check_name(*options.group_filter_metric, "group_filter_metric");
  if (options.group_filter_tag && options.group_filter_metric) {
    throw_invalid("group_filter_tag '" + *options.group_filter_tag + "' and group_filter_metric '" +
                  *options.group_filter_metric + "': the DAPO values come from a tag or from the client, not both");
  }
  if (!options.group_filter_metric && !request.group_values.empty()) {
    throw_invalid("group_values for " + std::to_string(request.group_values.size()) +
                  " groups need group_filter_metric (the metric they are values of)");
  }
  for (const auto& [uid, values] : request.group_values) check_name(uid, "group_values uid");
  check_at_least(options.gen_batch_size, 1, "gen_batch_size");
  check_at_least(options.max_inflight_prompts, 0, "max_inflight_prompts");
  check_at_least(request.cursor.refill_credit, 0, "refill_credit");
  check_evictions(request.cursor.evictions);
  check_at_least(request.global_steps, -kMaxReplayCount, "global_steps");
  check_at_least(request.wait_ms, 0, "wait_ms");
  if (request.wait_ms > kMaxReplayWaitMs) {
    throw_invalid("wait_ms = " + std::to_string(request.wait_ms) + " must be <= " + std::to_string(kMaxReplayWaitMs));
  }
  if (request.pass_id != 0) {
    check_at_least(request.lease_ms, 1, "lease_ms", " (a pass with a pass_id is kept for its lease)");
    if (request.lease_ms > kMaxReplayLeaseMs) {
      throw_invalid("lease_ms = " + std::to_string(request.lease_ms) +
                    " must be <= " + std::to_string(kMaxReplayLeaseMs) + " (an hour)");
    }
  } else if (request.lease_ms != 0) {
    throw_invalid("lease_ms = " + std::to_string(request.lease_ms) + " needs a pass_id (0: nothing is kept)");
  }
  check_at_least(options.balance_ranks, 0, "balance_ranks", " (0: no per-rank balance)");
  if (options.balance_ranks > kMaxReplayBalanceRanks) {
    throw_invalid("balance_ranks = " + std::to_string(options.balance_ranks) +
                  " must be <= " + std::to_string(kMaxReplayBalanceRanks));
  }
  if (options.balance_ranks > 0) {
    check_name(options.balance_length_tag, "balance_length_tag");
    replay_balance_workload(options.balance_workload);
  }
  if (options.mode != ReplayMode::kSync) return;
  if (options.max_staleness_versions) {
    throw_invalid("max_staleness_versions = " + std::to_string(*options.max_staleness_versions) +
                  " is for mode 'async'; sync is on-policy (no staleness control)");
  }
  if (request.step == ReplayStep::kEvict) {
    throw_invalid("step 'evict' (wait_for_sampleable) is for mode 'async'; sync sampling evicts as it samples");
  }
  if (options.group_filtering() && options.max_inflight_prompts == 0) {
    throw_invalid("max_inflight_prompts = 0 must be >= 1 with a group filter (" +
                  (options.group_filter_tag ? "group_filter_tag '" + *options.group_filter_tag + "'"
                                            : "group_filter_metric '" + *options.group_filter_metric + "'") +
                  ") in mode 'sync' (refills are bounded by the prompts in flight)");
  }
  if (options.refill_failed_groups && options.gen_batch_size != 1) {
    throw_invalid("gen_batch_size = " + std::to_string(options.gen_batch_size) +
                  " must be 1 with refill_failed_groups (a failed group is refilled one prompt at a time)");
  }
}

void check_reissue_request(const std::string& partition_id, int64_t global_steps) {
  check_name(partition_id, "partition_id");
  check_at_least(global_steps, -kMaxReplayCount, "global_steps");
}

}  // namespace core
}  // namespace seqflow
