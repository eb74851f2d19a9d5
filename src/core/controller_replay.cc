// Controller::replay_pass: one pass of verl's replay-buffer loop on the
// controller's own keys and tags, under its lock (no listing crosses a
// boundary), applied whole: evicted groups, discarded surplus and the
// selected prompt keys are released as kv_clear releases them; or, for a
// pass with a pass_id, kept (core/replay_leases.h) with its selected prompt
// keys held until ack_replay_pass.
#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/controller_state.h"
#include "core/custom_meta.h"
#include "core/name_rule.h"
#include "core/replay_balance.h"
#include "core/replay_index.h"
#include "core/replay_leases.h"
#include "core/replay_selection.h"
#include "seqflow/controller.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

using core::PartitionState;
using core::ReplayGroups;

// The selected groups' served trajectories, in arrival order, with their tags.
void answer_selected(const PartitionState& partition, const ReplayGroups& groups,
                     const std::vector<std::string_view>& selected, bool member_status, ReplayPass& pass) {
  std::vector<core::ReplayTrajectory> trajectories;
  for (std::string_view uid : selected) {
    const std::vector<core::ReplayTrajectory> found = groups.served_trajectories(uid, member_status);
    trajectories.insert(trajectories.end(), found.begin(), found.end());
  }
  std::sort(trajectories.begin(), trajectories.end(),
            [](const auto& a, const auto& b) { return a.arrival < b.arrival; });
  for (const core::ReplayTrajectory& trajectory : trajectories) {
    pass.keys.push_back(*partition.key_of(trajectory.slot));
    pass.tags.push_back(core::decode_meta(partition.meta_bytes(trajectory.slot)));
  }
}

std::unordered_map<std::string_view, uint32_t> prompt_slots(const ReplayGroups& groups) {
  std::unordered_map<std::string_view, uint32_t> slots;
  for (const core::ReplayPrompt& prompt : groups.terminal()) slots.emplace(prompt.uid, prompt.slot);
  return slots;
}

// The slots of the evicted groups (prompt and trajectories), of the
// selected groups' failed and aborted members (member_status) and, unless
// they are held, of the selected prompts.
std::vector<uint32_t> slots_to_release(const ReplayGroups& groups, const core::ReplayPlan& plan, bool hold_selected,
                                       bool member_status) {
  if (plan.evicted.empty() && plan.selected.empty()) return {};
  const std::unordered_map<std::string_view, uint32_t> prompt_slot = prompt_slots(groups);
  std::vector<uint32_t> slots;
  for (std::string_view uid : plan.evicted) {
    slots.push_back(prompt_slot.at(uid));
    for (const core::ReplayTrajectory& trajectory : groups.trajectories(uid)) slots.push_back(trajectory.slot);
  }
  for (std::string_view uid : plan.selected) {
    if (!hold_selected) slots.push_back(prompt_slot.at(uid));
    if (!member_status) continue;
    for (const core::ReplayTrajectory& trajectory : groups.trajectories(uid)) {
      if (trajectory.status == core::MemberStatus::kLeftOut) slots.push_back(trajectory.slot);
    }
  }
  return slots;
}

// The failed and aborted members of the groups a plan evicts or selects.
int64_t left_out_members(const ReplayGroups& groups, const core::ReplayPlan& plan) {
  std::unordered_set<std::string_view> released(plan.evicted.begin(), plan.evicted.end());
  released.insert(plan.selected.begin(), plan.selected.end());
  int64_t count = 0;
  for (const core::ReplayPrompt& prompt : groups.terminal()) {
    if (released.count(prompt.uid) > 0) count += prompt.members_left_out;
  }
  return count;
}

// The prompt samples a kept pass holds.
std::vector<core::ReplayLeases::Prompt> held_prompts(const core::ControlData& data, const PartitionState& partition,
                                                     const ReplayGroups& groups,
                                                     const std::vector<std::string_view>& selected) {
  const std::unordered_map<std::string_view, uint32_t> prompt_slot = prompt_slots(groups);
  std::vector<core::ReplayLeases::Prompt> held;
  for (std::string_view uid : selected) {
    const int64_t index = partition.global_index(prompt_slot.at(uid));
    held.push_back({index, data.generation(index)});
  }
  return held;
}

// A pass sent again under a kept pass's id: the kept answer, for the same pass only.
ReplayPass answer_again(const core::ReplayLeases::Kept& kept, const ReplayRequest& request) {
  if (kept.restored && !kept.acknowledged) {
    throw_invalid("pass_id = " + std::to_string(request.pass_id) + " names a pass kept in partition '" +
                  request.partition_id +
                  "' before the controller was restored from a checkpoint, which keeps its held prompts but not its "
                  "answer; acknowledge it (ack_replay_pass) or let its lease end, and pass with a new pass_id");
  }
  if (kept.acknowledged || kept.step != request.step || kept.global_steps != request.global_steps ||
      kept.batch_size != request.batch_size) {
    throw_invalid(
        "pass_id = " + std::to_string(request.pass_id) + " names a pass kept in partition '" + request.partition_id +
        "' that " +
        (kept.acknowledged ? std::string("was acknowledged") : "had another step, global_steps or batch_size") +
        "; a new pass needs a new pass_id");
  }
  return kept.answer;
}

std::vector<std::string> strings_of(const std::vector<std::string_view>& views) { return {views.begin(), views.end()}; }

}  // namespace

ReplayPass Controller::replay_pass(const ReplayRequest& request) {
  core::check_replay_request(request);
  const ReplayOptions& options = request.options;
  std::unique_lock lock(state_->mutex);
  core::ReplayLeases& kept_passes = state_->replay_leases;
  state_->expire_replay_passes();
  if (request.pass_id != 0) {
    if (const core::ReplayLeases::Kept* kept = kept_passes.find(request.partition_id, request.pass_id)) {
      return answer_again(*kept, request);
    }
  }
  PartitionState* partition = state_->data.find(request.partition_id);
  ReplayGroups groups = partition != nullptr ? state_->replay_indexes[request.partition_id].groups(
                                                   *partition, state_->held_replay_slots(*partition))
                                             : ReplayGroups{};
  if (partition != nullptr && options.member_status) groups.apply_member_status(*partition);
  core::GroupFilterAnswer filter;
  if (partition != nullptr && options.evict && options.group_filtering()) {
    filter = state_->group_filters[request.partition_id].filtered(*partition, groups, options, request.group_values);
  }
  // Finished groups without their values yet stay in flight for this pass: no pass waits on the
  // values of groups that finish while the client reads the last ones.
  groups.hold_in_flight(filter.unclassified_uids);
  ReplayPass pass;
  pass.unclassified_keys = std::move(filter.unclassified_keys);
  const core::ReplayPlan plan = core::plan_replay_pass(request, groups, filter.filtered, state_->data.policy_version());

  pass.refill = plan.refill;
  pass.ready = plan.ready;
  pass.sampleable = static_cast<int64_t>(plan.sampleable.size());
  pass.cursor = plan.cursor;
  if (options.member_status) pass.cursor.evictions.left_out_members += left_out_members(groups, plan);
  if (request.step == ReplayStep::kEvict && plan.ready) pass.sampleable_uids = strings_of(plan.sampleable);
  if (partition != nullptr && !plan.selected.empty()) {
    answer_selected(*partition, groups, plan.selected, options.member_status, pass);
    if (options.mode == ReplayMode::kSync && options.evict && pass.keys.empty()) {
      throw Error(ErrorCode::kInternal,
                  "Sync replay buffer selected terminal groups with no materializable trajectories." +
                      std::string(options.refill_failed_groups ? ""
                                                               : " Enable refill_failed_groups "
                                                                 "(verl: sync_refill_failed_groups) "
                                                                 "to replace failed groups."));
    }
    if (options.balance_ranks > 0) core::balance_selected(options, pass);  // before anything changes
    pass.selected_uids = strings_of(plan.selected);
  }
  const bool keep = request.pass_id != 0;
  const std::vector<uint32_t> slots = slots_to_release(groups, plan, keep, options.member_status);
  const bool changes = !slots.empty() || !plan.selected.empty();
  std::optional<core::ReplayLeases::Staged> staged;  // before anything changes: a pass is kept whole or not at all
  if (keep && changes) {
    kept_passes.check_room();
    core::ReplayLeases::Kept kept{request.step, request.global_steps, request.batch_size, pass, {}, {}, false, false};
    kept.answer.kept = true;
    if (!plan.selected.empty()) kept.held = held_prompts(state_->data, *partition, groups, plan.selected);
    kept.expiry = core::ReplayLeases::Clock::now() + std::chrono::milliseconds(request.lease_ms);
    staged = kept_passes.stage(request.partition_id, request.pass_id, std::move(kept));
  }
  if (!slots.empty()) {
    auto cleared = state_->change_logs.describe(request.partition_id, *partition, ChangeKind::kCleared, slots, false,
                                                core::ChangeLogs::Clock::now());
    // First: the uids are views of the keys released below.
    if (auto cache = state_->group_filters.find(request.partition_id); cache != state_->group_filters.end()) {
      for (std::string_view uid : plan.evicted) cache->second.forget(uid);
      for (std::string_view uid : plan.selected) cache->second.forget(uid);
    }
    pass.released = state_->data.remove_samples(*partition, slots);
    state_->change_logs.append(request.partition_id, std::move(cleared));
    state_->leases.forget_samples(request.partition_id, pass.released);
    state_->notify_changed(&request.partition_id);
  }
  if (staged) {
    kept_passes.keep(std::move(*staged));
    pass.kept = true;
  }
  const bool idle =
      request.step != ReplayStep::kCount && pass.refill == 0 && !pass.ready && pass.unclassified_keys.empty();
  if (idle && request.wait_ms > 0) state_->changed.wait_for(lock, std::chrono::milliseconds(request.wait_ms));
  return pass;
}

ReplayAck Controller::ack_replay_pass(const std::string& partition_id, uint64_t pass_id) {
  core::check_name(partition_id, "partition_id");
  if (pass_id == 0) throw_invalid("pass_id = 0 names no pass: a kept pass has the nonzero id it was sent with");
  std::lock_guard lock(state_->mutex);
  core::ReplayLeases& kept_passes = state_->replay_leases;
  state_->expire_replay_passes();
  core::ReplayLeases::Kept* kept = kept_passes.find(partition_id, pass_id);
  ReplayAck ack;
  if (kept == nullptr) return ack;  // its lease ended first: its groups went back
  ack.acknowledged = true;
  // The held prompts are cleared before the pass is acknowledged, which
  // allocates nothing: a clear that fails leaves the pass held, for the
  // acknowledgement sent again, and no prompt sampleable twice.
  PartitionState* partition = state_->data.find(partition_id);
  std::vector<uint32_t> slots;
  if (partition != nullptr) {
    for (const core::ReplayLeases::Prompt& prompt : kept->held) {
      // Skipped when cleared meanwhile (and its index perhaps reused).
      const auto slot = state_->data.slot_of(*partition, prompt.global_index);
      if (slot && state_->data.generation(prompt.global_index) == prompt.generation) slots.push_back(*slot);
    }
  }
  if (slots.empty()) {
    kept_passes.acknowledge(*kept);
    return ack;
  }
  auto cleared = state_->change_logs.describe(partition_id, *partition, ChangeKind::kCleared, slots, false,
                                              core::ChangeLogs::Clock::now());
  ack.released = state_->data.remove_samples(*partition, std::move(slots));
  kept_passes.acknowledge(*kept);
  state_->change_logs.append(partition_id, std::move(cleared));
  state_->leases.forget_samples(partition_id, ack.released);
  state_->notify_changed(&partition_id);
  return ack;
}

}  // namespace seqflow
