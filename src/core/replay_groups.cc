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

ReplayGroups scan_replay_groups(const PartitionState& partition) {
  ReplayGroups groups;
  size_t arrival = 0;
  for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot), ++arrival) {
    const std::string* key = partition.key_of(slot);
    if (key == nullptr) continue;
    const Value tag = decode_meta(partition.meta_bytes(slot));
    if (!is_prompt(tag)) {
      groups.trajectories[key->substr(0, key->find('_'))].push_back({slot, arrival});
      continue;
    }
    const Value* steps = tag.find("global_steps");
    if (steps == nullptr || !steps->is_integer() || steps->as_int() < -kMaxReplayCount ||
        steps->as_int() > kMaxReplayCount) {
      throw_invalid("prompt key '" + *key + "' has tag global_steps " + (steps ? steps->dump() : "(none)") +
                    "; expected an integer of at most 2^53 in magnitude");
    }
    groups.prompts.push_back({*key, slot, parse_status(tag.find("status"), *key), steps->as_int()});
  }
  return groups;
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
  for (const ReplayPrompt& prompt : groups.prompts) {
    if (prompt.status == PromptStatus::kFinished) finished.insert(prompt.uid);
  }
  std::erase_if(classification_, [&](const auto& entry) { return finished.count(entry.first) == 0; });

  std::vector<std::string> missing;
  for (const ReplayPrompt& prompt : groups.prompts) {
    if (prompt.status != PromptStatus::kFinished || classification_.count(prompt.uid) > 0) continue;
    std::vector<double> values;
    bool complete = false;
    if (auto found = groups.trajectories.find(prompt.uid); found != groups.trajectories.end()) {
      complete = true;
      for (const ReplayTrajectory& trajectory : found->second) {
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
      missing.push_back(prompt.uid);
      continue;
    }
    const bool same = values.size() > 1 &&
                      std::all_of(values.begin(), values.end(), [&](double value) { return value == values.front(); });
    classification_[prompt.uid] = same ? std::optional<double>(values.front()) : std::nullopt;
  }
  if (!missing.empty()) {
    std::sort(missing.begin(), missing.end());
    std::string names;
    for (size_t i = 0; i < std::min<size_t>(missing.size(), 5); ++i) names += (i ? ", '" : "'") + missing[i] + "'";
    throw_invalid("finished groups are missing the group filter tag '" + tag +
                  "' (a number on every trajectory): " + names);
  }
  std::vector<std::pair<std::string, double>> out;
  for (const ReplayPrompt& prompt : groups.prompts) {
    if (prompt.status != PromptStatus::kFinished) continue;
    if (const std::optional<double>& value = classification_.at(prompt.uid)) out.emplace_back(prompt.uid, *value);
  }
  return out;
}

}  // namespace seqflow::core
