// Controller::reissue_inflight_prompts: what verl's V1 trainer does when it
// resumes (trainer_base.py _reissue_inflight_prompts), on the controller's
// own keys and tags under its lock, whole: the prompts in flight are tagged
// pending at the resumed step and their old trajectories released, with no
// listing across a boundary and no pass in between.
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/controller_state.h"
#include "core/custom_meta.h"
#include "core/meta_update.h"
#include "core/replay_groups.h"
#include "core/replay_selection.h"
#include "seqflow/controller.h"

namespace seqflow {
namespace {

using core::PartitionState;

std::optional<std::string_view> prompt_status(const Value& tag) {
  const Value* status = tag.find("status");
  if (status == nullptr || !status->is_string()) return std::nullopt;
  return std::string_view(status->as_string());
}

bool in_flight(std::string_view status) { return status == "pending" || status == "running"; }
bool terminal(std::string_view status) { return status == "finished" || status == "failure"; }

}  // namespace

ReissuedPrompts Controller::reissue_inflight_prompts(const std::string& partition_id, int64_t global_steps,
                                                     bool member_status) {
  core::check_reissue_request(partition_id, global_steps);
  const Value pending{{"is_prompt", true}, {"status", "pending"}, {"global_steps", global_steps}};
  std::lock_guard lock(state_->mutex);
  state_->expire_replay_passes();
  PartitionState* partition = state_->data.find(partition_id);
  ReissuedPrompts reissued;
  if (partition == nullptr) return reissued;
  // One walk: which keys are prompts in flight (with member_status, also
  // terminal prompts, kept if a member turns out to be in flight), and which
  // are not prompts (trajectories, as verl reads them).
  std::vector<std::pair<uint32_t, bool>> prompt_candidates;  // slot, in flight by its own status
  std::vector<uint32_t> other_slots;
  std::unordered_set<std::string_view> members_in_flight;
  std::unordered_map<std::string_view, std::vector<std::string>> unknown_members;
  for (uint32_t slot = partition->first(); slot != core::kNoSlot; slot = partition->next(slot)) {
    const std::string* key = partition->key_of(slot);
    if (key == nullptr) continue;
    const Value tag = core::decode_meta(partition->meta_bytes(slot));
    if (core::is_prompt_tag(tag)) {
      const std::optional<std::string_view> status = prompt_status(tag);
      if (status && in_flight(*status)) {
        prompt_candidates.emplace_back(slot, true);
      } else if (member_status && status && terminal(*status)) {
        prompt_candidates.emplace_back(slot, false);
      }
      continue;
    }
    other_slots.push_back(slot);
    if (!member_status) continue;
    const core::MemberStatus member = core::member_status_of(tag);
    if (member == core::MemberStatus::kInFlight) members_in_flight.insert(core::uid_of(*key));
    if (member == core::MemberStatus::kUnknown) unknown_members[core::uid_of(*key)].push_back(*key);
  }
  // A terminal prompt is re-issued when a member of its group is still in
  // flight, unless a kept pass holds it (selected: its trainer has the group).
  const std::unordered_set<uint32_t> held =
      member_status ? state_->held_replay_slots(*partition) : std::unordered_set<uint32_t>{};
  std::vector<uint32_t> prompt_slots;
  std::vector<std::string> unknown;
  for (const auto& [slot, own] : prompt_candidates) {
    const std::string_view uid = *partition->key_of(slot);
    if (!own) {
      if (const auto found = unknown_members.find(uid); found != unknown_members.end()) {
        unknown.insert(unknown.end(), found->second.begin(), found->second.end());
      }
      if (!members_in_flight.count(uid) || held.count(slot) > 0) continue;
    }
    prompt_slots.push_back(slot);
  }
  if (!unknown.empty()) core::throw_unknown_member_statuses(std::move(unknown));
  if (prompt_slots.empty()) return reissued;
  std::unordered_set<std::string_view> uids;
  for (uint32_t slot : prompt_slots) {
    reissued.keys.push_back(*partition->key_of(slot));
    uids.insert(*partition->key_of(slot));
  }
  std::vector<uint32_t> trajectory_slots;
  for (uint32_t slot : other_slots) {
    if (uids.count(core::uid_of(*partition->key_of(slot)))) trajectory_slots.push_back(slot);
  }

  // Everything that can fail, before anything changes.
  std::vector<int64_t> indexes;
  for (uint32_t slot : prompt_slots) indexes.push_back(partition->global_index(slot));
  const std::vector<Value> tags(prompt_slots.size(), pending);
  std::vector<std::pair<uint32_t, PartitionState::StoredMeta>> retagged;
  for (auto& [slot, meta] :
       core::prepare_meta(*partition, prompt_slots, indexes, tags, core::encode_updates(indexes, tags))) {
    retagged.emplace_back(slot, partition->stored(std::move(meta)));
  }
  auto cleared = state_->change_logs.describe(partition_id, *partition, ChangeKind::kCleared, trajectory_slots, false,
                                              core::ChangeLogs::Clock::now());
  reissued.released = state_->data.remove_samples(*partition, std::move(trajectory_slots));
  reissued.cleared_trajectories = static_cast<int64_t>(reissued.released.size());
  for (auto& [slot, meta] : retagged) partition->swap_meta(slot, meta);
  state_->change_logs.append(partition_id, std::move(cleared));
  state_->change_logs.record(partition_id, *partition, ChangeKind::kTagged, prompt_slots, true);
  state_->leases.forget_samples(partition_id, reissued.released);
  state_->notify_changed(&partition_id);
  return reissued;
}

}  // namespace seqflow
