// Reading verl's prompt and trajectory keys from a partition's tags.
#include "core/replay_groups.h"

#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "core/custom_meta.h"
#include "seqflow/error.h"

namespace seqflow::core {
namespace {

PromptStatus parse_status(const Value* status, const std::string& key) {
  if (status != nullptr && status->is_string()) {
    const std::string& name = status->as_string();
    if (name == "pending") return PromptStatus::kPending;
    if (name == "running") return PromptStatus::kRunning;
    if (name == "finished") return PromptStatus::kFinished;
    if (name == "failure") return PromptStatus::kFailure;
  }
  throw_invalid("prompt key '" + key + "' has tag status " + (status ? status->dump() : std::string("(none)")) +
                "; expected 'pending', 'running', 'finished' or 'failure'");
}

bool is_prompt(const Value& tag) {
  const Value* flag = tag.find("is_prompt");
  if (flag == nullptr || flag->is_null()) return false;
  if (flag->is_bool()) return flag->as_bool();
  if (flag->is_number()) return flag->as_double() != 0.0;
  return !flag->empty();  // Python's truth of a string or container
}

}  // namespace

const std::vector<ReplayTrajectory>* ReplayGroups::trajectories(std::string_view uid) const {
  if (!trajectories_) {
    trajectories_.emplace();
    for (const ReplayPrompt& prompt : prompts_) {
      if (prompt.status == PromptStatus::kFinished || prompt.status == PromptStatus::kFailure) {
        trajectories_->try_emplace(prompt.uid);
      }
    }
    size_t arrival = 0;
    for (uint32_t slot = partition_ ? partition_->first() : kNoSlot; slot != kNoSlot;
         slot = partition_->next(slot), ++arrival) {
      const std::string* key = partition_->key_of(slot);
      if (key == nullptr || tags_->prompt(slot)) continue;  // held prompts too: never a trajectory
      const auto group = trajectories_->find(std::string_view(*key).substr(0, key->find('_')));
      if (group != trajectories_->end()) group->second.push_back({slot, arrival});
    }
    std::erase_if(*trajectories_, [](const auto& group) { return group.second.empty(); });
  }
  const auto found = trajectories_->find(uid);
  return found == trajectories_->end() ? nullptr : &found->second;
}

ReplayGroups ReplayTagCache::scan(const PartitionState& partition, const std::function<bool(uint32_t slot)>& held) {
  if (partition.number() != partition_number_ || (walked_ && walked_->epoch != partition.listing_version().epoch)) {
    slots_.clear();  // another partition: its slots' changes count anew
    walked_.reset();
    partition_number_ = partition.number();
  }
  if (walked_ != partition.listing_version()) walk(partition);
  std::vector<ReplayPrompt> prompts;
  prompts.reserve(prompt_slots_.size());
  for (uint32_t slot : prompt_slots_) {
    if (held && held(slot)) continue;
    const SlotTag& tag = slots_[slot];
    prompts.push_back({*partition.key_of(slot), slot, tag.status, tag.global_steps});
  }
  return ReplayGroups(partition, *this, std::move(prompts));
}

void ReplayTagCache::walk(const PartitionState& partition) {
  std::vector<uint32_t> prompt_slots;
  for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
    const std::string* key = partition.key_of(slot);
    if (key == nullptr) continue;
    if (slot >= slots_.size()) slots_.resize(slot + 1);
    SlotTag& cached = slots_[slot];
    if (cached.change != partition.keyed_change(slot)) {
      const Value tag = decode_meta(partition.meta_bytes(slot));
      SlotTag parsed{partition.keyed_change(slot), Kind::kTrajectory, PromptStatus::kPending, 0};
      if (is_prompt(tag)) {
        const Value* steps = tag.find("global_steps");
        if (steps == nullptr || !steps->is_integer() || steps->as_int() < -kMaxReplayCount ||
            steps->as_int() > kMaxReplayCount) {
          throw_invalid("prompt key '" + *key + "' has tag global_steps " + (steps ? steps->dump() : "(none)") +
                        "; expected an integer of at most 2^53 in magnitude");
        }
        parsed = {parsed.change, Kind::kPrompt, parse_status(tag.find("status"), *key), steps->as_int()};
      }
      cached = parsed;
    }
    if (cached.kind == Kind::kPrompt) prompt_slots.push_back(slot);
  }
  prompt_slots_ = std::move(prompt_slots);
  walked_ = partition.listing_version();
}

std::vector<std::pair<std::string, double>> GroupFilterCache::filtered(const PartitionState& partition,
                                                                       const ReplayGroups& groups,
                                                                       const std::string& tag) {
  if (tag != tag_ || partition.number() != partition_number_) {
    classification_.clear();
    tag_ = tag;
    partition_number_ = partition.number();
  }
  std::unordered_set<std::string_view> finished;
  for (const ReplayPrompt& prompt : groups.prompts()) {
    if (prompt.status == PromptStatus::kFinished) finished.insert(prompt.uid);
  }
  std::erase_if(classification_, [&](const auto& entry) { return finished.count(entry.first) == 0; });

  std::vector<std::string> missing;
  for (const ReplayPrompt& prompt : groups.prompts()) {
    const std::string uid(prompt.uid);
    if (prompt.status != PromptStatus::kFinished || classification_.count(uid) > 0) continue;
    std::vector<double> values;
    bool complete = false;
    if (const std::vector<ReplayTrajectory>* found = groups.trajectories(prompt.uid)) {
      complete = true;
      for (const ReplayTrajectory& trajectory : *found) {
        const Value meta = decode_meta(partition.meta_bytes(trajectory.slot));
        const Value* value = meta.find(tag);
        if (value == nullptr || !value->is_number()) {
          complete = false;
          break;
        }
        values.push_back(value->as_double());
      }
    }
    if (!complete) {
      missing.push_back(uid);
      continue;
    }
    const bool same = values.size() > 1 &&
                      std::all_of(values.begin(), values.end(), [&](double value) { return value == values.front(); });
    classification_[uid] = same ? std::optional<double>(values.front()) : std::nullopt;
  }
  if (!missing.empty()) {
    std::sort(missing.begin(), missing.end());
    std::string names;
    for (size_t i = 0; i < std::min<size_t>(missing.size(), 5); ++i) names += (i ? ", '" : "'") + missing[i] + "'";
    throw_invalid("finished groups are missing the group filter tag '" + tag +
                  "' (a number on every trajectory): " + names);
  }
  std::vector<std::pair<std::string, double>> out;
  for (const ReplayPrompt& prompt : groups.prompts()) {
    if (prompt.status != PromptStatus::kFinished) continue;
    const std::string uid(prompt.uid);
    if (const std::optional<double>& value = classification_.at(uid)) out.emplace_back(uid, *value);
  }
  return out;
}

}  // namespace seqflow::core
