// Controller::replay_pass: one pass of verl's replay-buffer loop on the
// controller's own keys and tags, under its lock (no listing crosses a
// boundary), applied whole: evicted groups, discarded surplus and the
// selected prompt keys are released as kv_clear releases them.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/controller_state.h"
#include "core/custom_meta.h"
#include "core/replay_selection.h"
#include "seqflow/controller.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

using core::PartitionState;
using core::ReplayGroups;

// The selected groups' trajectories, in arrival order, with their tags.
void answer_selected(const PartitionState& partition, const ReplayGroups& groups,
                     const std::vector<std::string>& selected, ReplayPass& pass) {
  std::vector<core::ReplayTrajectory> trajectories;
  for (const std::string& uid : selected) {
    if (auto found = groups.trajectories.find(uid); found != groups.trajectories.end()) {
      trajectories.insert(trajectories.end(), found->second.begin(), found->second.end());
    }
  }
  std::sort(trajectories.begin(), trajectories.end(),
            [](const auto& a, const auto& b) { return a.arrival < b.arrival; });
  for (const core::ReplayTrajectory& trajectory : trajectories) {
    pass.keys.push_back(*partition.key_of(trajectory.slot));
    pass.tags.push_back(core::decode_meta(partition.meta_bytes(trajectory.slot)));
  }
}

// The slots of the evicted groups (prompt and trajectories) and of the selected prompts.
std::vector<uint32_t> slots_to_release(const ReplayGroups& groups, const core::ReplayPlan& plan) {
  std::unordered_map<std::string_view, uint32_t> prompt_slot;
  for (const core::ReplayPrompt& prompt : groups.prompts) prompt_slot.emplace(prompt.uid, prompt.slot);
  std::vector<uint32_t> slots;
  for (const std::string& uid : plan.evicted) {
    slots.push_back(prompt_slot.at(uid));
    if (auto found = groups.trajectories.find(uid); found != groups.trajectories.end()) {
      for (const core::ReplayTrajectory& trajectory : found->second) slots.push_back(trajectory.slot);
    }
  }
  for (const std::string& uid : plan.selected) slots.push_back(prompt_slot.at(uid));
  return slots;
}

}  // namespace

ReplayPass Controller::replay_pass(const ReplayRequest& request) {
  core::check_replay_request(request);
  const ReplayOptions& options = request.options;
  std::unique_lock lock(state_->mutex);
  PartitionState* partition = state_->data.find(request.partition_id);
  ReplayGroups groups = partition != nullptr ? core::scan_replay_groups(*partition) : ReplayGroups{};
  core::GroupFilterAnswer filter;
  if (partition != nullptr && options.evict && options.group_filtering()) {
    filter = state_->group_filters[request.partition_id].filtered(*partition, groups, options, request.group_values);
  }
  // Finished groups without their values yet stay in flight for this pass: no pass waits on the
  // values of groups that finish while the client reads the last ones.
  const std::unordered_set<std::string> unclassified(filter.unclassified_uids.begin(), filter.unclassified_uids.end());
  for (core::ReplayPrompt& prompt : groups.prompts) {
    if (unclassified.count(prompt.uid) > 0) prompt.status = core::PromptStatus::kRunning;
  }
  ReplayPass pass;
  pass.unclassified_keys = std::move(filter.unclassified_keys);
  const core::ReplayPlan plan = core::plan_replay_pass(request, groups, filter.filtered);

  pass.refill = plan.refill;
  pass.ready = plan.ready;
  pass.sampleable = static_cast<int64_t>(plan.sampleable.size());
  pass.cursor = plan.cursor;
  if (request.step == ReplayStep::kEvict && plan.ready) pass.sampleable_uids = plan.sampleable;
  if (partition != nullptr && !plan.selected.empty()) {
    answer_selected(*partition, groups, plan.selected, pass);
    if (options.mode == ReplayMode::kSync && options.evict && pass.keys.empty()) {
      throw Error(ErrorCode::kInternal,
                  "Sync replay buffer selected terminal groups with no materializable trajectories." +
                      std::string(options.refill_failed_groups ? ""
                                                               : " Enable refill_failed_groups "
                                                                 "(verl: sync_refill_failed_groups) "
                                                                 "to replace failed groups."));
    }
    pass.selected_uids = plan.selected;
  }
  const std::vector<uint32_t> slots = slots_to_release(groups, plan);
  if (!slots.empty()) {
    auto cleared = state_->change_logs.describe(request.partition_id, *partition, ChangeKind::kCleared, slots, false,
                                                core::ChangeLogs::Clock::now());
    pass.released = state_->data.remove_samples(*partition, slots);
    state_->change_logs.append(request.partition_id, std::move(cleared));
    state_->leases.forget_samples(request.partition_id, pass.released);
    if (auto cache = state_->group_filters.find(request.partition_id); cache != state_->group_filters.end()) {
      for (const std::string& uid : plan.evicted) cache->second.forget(uid);
      for (const std::string& uid : plan.selected) cache->second.forget(uid);
    }
    state_->notify_changed(&request.partition_id);
  }
  const bool idle =
      request.step != ReplayStep::kCount && pass.refill == 0 && !pass.ready && pass.unclassified_keys.empty();
  if (idle && request.wait_ms > 0) state_->changed.wait_for(lock, std::chrono::milliseconds(request.wait_ms));
  return pass;
}

}  // namespace seqflow
