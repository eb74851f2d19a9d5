// Controller::reissue_inflight_prompts: what verl's V1 trainer does when it
// resumes (trainer_base.py _reissue_inflight_prompts), on the controller's
// own keys and tags under its lock, whole: the prompts in flight are tagged
// pending at the resumed step and their old trajectories released, with no
// listing across a boundary and no pass in between.
#include <string_view>
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

bool in_flight(const Value& tag) {
  if (!core::is_prompt_tag(tag)) return false;
  const Value* status = tag.find("status");
  return status != nullptr && status->is_string() &&
         (status->as_string() == "pending" || status->as_string() == "running");
}

}  // namespace

ReissuedPrompts Controller::reissue_inflight_prompts(const std::string& partition_id, int64_t global_steps) {
  core::check_reissue_request(partition_id, global_steps);
  const Value pending{{"is_prompt", true}, {"status", "pending"}, {"global_steps", global_steps}};
  std::lock_guard lock(state_->mutex);
  PartitionState* partition = state_->data.find(partition_id);
  ReissuedPrompts reissued;
  if (partition == nullptr) return reissued;
  // One walk: which keys are prompts in flight, and which are not prompts (trajectories, as verl reads them).
  std::vector<uint32_t> prompt_slots;
  std::vector<uint32_t> other_slots;
  for (uint32_t slot = partition->first(); slot != core::kNoSlot; slot = partition->next(slot)) {
    const std::string* key = partition->key_of(slot);
    if (key == nullptr) continue;
    const Value tag = core::decode_meta(partition->meta_bytes(slot));
    if (in_flight(tag)) {
      prompt_slots.push_back(slot);
    } else if (!core::is_prompt_tag(tag)) {
      other_slots.push_back(slot);
    }
  }
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
