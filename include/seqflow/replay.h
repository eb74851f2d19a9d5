// Replay selection: the loop verl 0.9.1's V1 ReplayBuffer runs in Python by
// polling kv_list, as one pass over the controller's own keys and tags.
//
// Keys follow verl's layout: a prompt key `{uid}` tagged {"is_prompt": true,
// "status": "pending" | "running" | "finished" | "failure", "global_steps":
// N}, and its trajectories `{uid}_{session}_{index}` (a key's uid is the text
// before its first '_'). A group is terminal when its prompt is finished or
// failure. One pass classifies the prompts, evicts the groups verl's matrix
// evicts (the prompt key and its trajectory keys), says how many new prompts
// to ask for, applies the `wait` gate and, when enough terminal groups are
// sampleable, selects the oldest prompts (by global_steps; ties in the
// prompt keys' arrival order) and clears their prompt keys.
//
// Exactly once: a pass with a pass_id (chosen by the caller) that changes
// anything is kept under that id for its lease. A retry with the same id
// gets the kept answer (same groups, refill and cursor) instead of a new
// pass; its selected prompt keys are held, not cleared (no later pass
// selects them) until ack_replay_pass clears them. Unacknowledged when the
// lease ends (the caller died), the held groups are sampleable again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqflow/value.h"

namespace seqflow {

// verl's trainer modes: sync (on-policy: staleness is a no-op) or async.
enum class ReplayMode { kSync, kAsync };
ReplayMode parse_replay_mode(std::string_view name);  // "sync", "async"

// What to do with groups older than max_off_policy_threshold or
// max_staleness_versions (async only): evict them when they finish, or hold
// sampling while one is in flight.
enum class StalenessStrategy { kDrop, kWait };
StalenessStrategy parse_staleness_strategy(std::string_view name);  // "drop", "wait"

// What a call does.
enum class ReplayStep {
  kCount,  // sampleable groups now; evicts nothing (verl's get_sampleable_count)
  kEvict,  // one eviction pass and the gate; selects nothing (wait_for_sampleable)
  kSample  // one eviction pass, then a selection when enough groups are sampleable
};
ReplayStep parse_replay_step(std::string_view name);  // "count", "evict", "sample"
const char* replay_step_name(ReplayStep step);

struct ReplayOptions {
  ReplayMode mode = ReplayMode::kAsync;
  // Most model versions a group may span (global_steps - its step + 1);
  // nullopt: no staleness control. Above 0.
  std::optional<int64_t> max_off_policy_threshold;
  // Most policy versions a group may lag (async only): a group whose
  // trajectories started generating at policy version `start` (the
  // smallest start version among them; a group without one has not
  // started) is stale when the controller's policy version - start exceeds
  // this. nullopt: off. At least 0. A group is stale if this or
  // max_off_policy_threshold says so; `strategy` governs both.
  std::optional<int64_t> max_staleness_versions;
  StalenessStrategy strategy = StalenessStrategy::kDrop;
  // DAPO: a finished group whose trajectories (more than one) all carry
  // the same value is evicted, as verl tests it (numpy's std of the values
  // is 0). The values are read from this tag of each trajectory, or
  // supplied by the client (group_filter_metric).
  std::optional<std::string> group_filter_tag;
  // False (verl's "val" partition): no eviction at all; every terminal
  // group is sampleable.
  bool evict = true;
  // Sync: failed groups without any trajectory are evicted and refilled.
  bool refill_failed_groups = false;
  // Sync DAPO: most prompts pending or running at once (verl's
  // max_inflight_gen_batches x train_batch_size), and the granularity of a
  // refill (gen_batch_size).
  int64_t max_inflight_prompts = 0;
  int64_t gen_batch_size = 1;
  // DAPO on the values of this metric, supplied by the client
  // (ReplayRequest::group_values; verl reads them from the trajectories'
  // data), not a tag: a pass answers the trajectory keys of newly finished
  // groups it has no values for (ReplayPass::unclassified_keys) and treats
  // those groups as still in flight until a pass brings their values. Not
  // with group_filter_tag.
  std::optional<std::string> group_filter_metric;
  // Per-DP-rank balance of the selected trajectories, as verl's trainer
  // balances a sampled batch (_balance_batch): 0 (off: arrival order) or
  // the number of ranks. Each trajectory's `balance_length_tag` (verl's
  // "seq_len") is its length; their costs under `balance_workload` (a
  // Workload::parse spec; verl's FLOP model by default) are split with
  // verl's get_seqlen_balanced_partitions (equal counts per rank), and the
  // keys come rank by rank. Trajectories that are not a multiple of the
  // ranks are answered in arrival order, with no rank fields.
  int64_t balance_ranks = 0;
  std::string balance_length_tag = "seq_len";
  std::string balance_workload = "verl";
  // The lifecycle of each member (beyond verl's layout, where the prompt's
  // status is the group's): every trajectory's tag "status" is "pending",
  // "running", "finished", "failed" (or verl's "failure") or "aborted"; one
  // without it counts as finished. A group is terminal when its prompt is
  // and no member is pending or running (until then it is in flight); its
  // failed and aborted members are never served nor read by the group
  // filter, and are released with their group; a finished prompt whose
  // members all failed or were aborted is a failed group.
  bool member_status = false;

  bool group_filtering() const { return group_filter_tag.has_value() || group_filter_metric.has_value(); }
};

// Evictions counted over the passes of one sample() (verl's metrics).
struct ReplayEvictions {
  int64_t stale = 0;
  int64_t stale_span_sum = 0;  // of the stale groups' spans (global_steps - step + 1)
  int64_t stale_span_max = 0;
  int64_t stale_span_min = 0;
  int64_t filtered = 0;
  std::vector<std::pair<double, int64_t>> filtered_values;  // the value a filtered group shared -> groups
  int64_t failed = 0;
  int64_t surplus = 0;  // sync DAPO: sampleable groups beyond the batch, discarded
  // Groups evicted as stale by policy version (max_staleness_versions),
  // and the most versions one lagged (policy version - its start).
  int64_t stale_versions = 0;
  int64_t stale_versions_age_max = 0;
  // member_status: the failed and aborted trajectories of the groups the
  // passes evicted or selected (released, never served).
  int64_t left_out_members = 0;

  void add(const ReplayEvictions& other);
  // verl's metric names under `prefix` ("training", "validation"); only
  // those with evictions, as verl's sample() returns them, and seqflow's
  // own for stale_versions and left_out_members when there are any. The filtered values (verl's
  // "_dapo_filtered_reward_counts") are filtered_values.
  std::vector<std::pair<std::string, double>> metrics(const std::string& prefix) const;
};

// What one sample() carries from pass to pass.
// The bound of every step and count a replay pass reads from a request or a
// tag (2^53: exact in the double of verl's metrics), so that spans and sums
// cannot overflow.
inline constexpr int64_t kMaxReplayCount = int64_t{1} << 53;

struct ReplayCursor {
  int64_t refill_credit = 0;  // sync DAPO: prompts owed, not yet asked for
  bool draining = false;      // sync DAPO: enough groups; waiting for the in-flight ones
  ReplayEvictions evictions;  // so far
};

struct ReplayRequest {
  std::string partition_id;
  int64_t global_steps = 0;
  int64_t batch_size = 0;  // kEvict: the target count; kCount: unused
  ReplayStep step = ReplayStep::kSample;
  ReplayOptions options;
  ReplayCursor cursor;
  // After a pass with nothing to do (no refill, nothing ready), wait up to
  // this long for a change of the controller's state before answering.
  int64_t wait_ms = 0;
  // group_filter_metric: the DAPO values of groups a pass answered as
  // unclassified, one per trajectory, by prompt uid.
  std::vector<std::pair<std::string, std::vector<double>>> group_values;
  // Nonzero: the caller's id of this pass (see above), kept for lease_ms
  // (1 .. kMaxLease) when the pass changes anything. 0: applied at once,
  // the selected prompt keys cleared before the answer leaves.
  uint64_t pass_id = 0;
  int64_t lease_ms = 0;
};

struct ReplayPass {
  int64_t refill = 0;  // prompts to ask refill_fn for now (then pass again at once)
  bool ready = false;  // kEvict: enough sampleable; kSample: selected
  int64_t sampleable = 0;
  std::vector<std::string> sampleable_uids;  // kEvict when ready: the sampleable prompts
  std::vector<std::string> selected_uids;    // kSample: oldest first
  // kSample: the selected groups' trajectory keys, in arrival order, with their tags.
  std::vector<std::string> keys;
  std::vector<Value> tags;
  ReplayCursor cursor;            // the request's, advanced by this pass
  std::vector<int64_t> released;  // global indexes released, for the storage to drop
  // group_filter_metric: the trajectory keys of finished groups with no
  // values yet (held in flight by this pass; pass again with their
  // group_values).
  std::vector<std::string> unclassified_keys;
  // Kept under the request's pass_id: acknowledge it (ack_replay_pass).
  bool kept = false;
  // balance_ranks: each rank's trajectory count (keys and tags come rank by
  // rank) and sum of lengths; and the length sums of as many equal chunks
  // of the arrival order (what verl logs as the imbalance before balancing).
  std::vector<int64_t> rank_sizes;
  std::vector<int64_t> rank_lengths;
  std::vector<int64_t> arrival_rank_lengths;
};

// ack_replay_pass's answer: whether the pass was still kept (false: its
// lease ended first, and its selected groups went back to be sampled again),
// and the prompt keys' global indexes released, for the storage to drop.
struct ReplayAck {
  bool acknowledged = false;
  std::vector<int64_t> released;
};

// reissue_inflight_prompts's answer: what verl's trainer re-issues when it
// resumes (trainer_base.py _reissue_inflight_prompts), done in one call.
struct ReissuedPrompts {
  // The prompt keys that were pending or running (with member_status, also
  // terminal ones whose members were in flight), in arrival order, tagged
  // {"is_prompt": true, "status": "pending", "global_steps": the step} now.
  std::vector<std::string> keys;
  int64_t cleared_trajectories = 0;  // their trajectory keys, released
  std::vector<int64_t> released;     // those trajectories' global indexes, for the storage to drop
};

}  // namespace seqflow
