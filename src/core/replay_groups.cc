// Reading verl's prompt and trajectory keys from a partition's tags.
#include "core/replay_groups.h"

#include <algorithm>
#include <array>
#include <span>
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

// numpy's sum of a contiguous float64 array (pairwise: plain below 8 values,
// 8 accumulators up to 128, halves above), bit for bit, so that a mean is
// numpy's.
double numpy_sum(std::span<const double> values) {
  const size_t n = values.size();
  if (n < 8) {
    double sum = 0.0;
    for (double value : values) sum += value;
    return sum;
  }
  if (n <= 128) {
    std::array<double, 8> lanes{};
    std::copy_n(values.begin(), 8, lanes.begin());
    size_t i = 8;
    for (; i < n - n % 8; i += 8) {
      for (size_t lane = 0; lane < 8; ++lane) lanes[lane] += values[i + lane];
    }
    double sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for (; i < n; ++i) sum += values[i];
    return sum;
  }
  size_t half = n / 2;
  half -= half % 8;
  return numpy_sum(values.first(half)) + numpy_sum(values.subspan(half));
}

// verl's test `len(values) > 1 and np.std(values) == 0.0`, computed as numpy
// computes it (the mean of the squared deviations from the mean): the value
// the group shares, or nullopt.
std::optional<double> shared_value(const std::vector<double>& values) {
  if (values.size() < 2) return std::nullopt;
  const auto count = static_cast<double>(values.size());
  const double mean = numpy_sum(values) / count;
  std::vector<double> squares;
  squares.reserve(values.size());
  for (double value : values) squares.push_back((value - mean) * (value - mean));
  if (!(numpy_sum(squares) / count == 0.0)) return std::nullopt;
  return values.front();
}

// Each trajectory's number under `tag`, or nullopt when one lacks it.
std::optional<std::vector<double>> tag_values(const PartitionState& partition,
                                              const std::vector<ReplayTrajectory>& trajectories,
                                              const std::string& tag) {
  std::vector<double> values;
  for (const ReplayTrajectory& trajectory : trajectories) {
    const Value meta = decode_meta(partition.meta_bytes(trajectory.slot));
    const Value* value = meta.find(tag);
    if (value == nullptr || !value->is_number()) return std::nullopt;
    values.push_back(value->as_double());
  }
  return values;
}

}  // namespace

bool is_prompt_tag(const Value& tag) {
  const Value* flag = tag.find("is_prompt");
  if (flag == nullptr || flag->is_null()) return false;
  if (flag->is_bool()) return flag->as_bool();
  if (flag->is_number()) return flag->as_double() != 0.0;
  return !flag->empty();  // Python's truth of a string or container
}

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
      const auto group = trajectories_->find(uid_of(*key));
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
      if (is_prompt_tag(tag)) {
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

void ReplayGroups::hold_in_flight(const std::vector<std::string>& uids) {
  if (uids.empty()) return;
  const std::unordered_set<std::string_view> held(uids.begin(), uids.end());
  for (ReplayPrompt& prompt : prompts_) {
    if (held.count(prompt.uid) > 0) prompt.status = PromptStatus::kRunning;
  }
}

GroupFilterAnswer GroupFilterCache::filtered(const PartitionState& partition, const ReplayGroups& groups,
                                             const ReplayOptions& options,
                                             const std::vector<std::pair<std::string, std::vector<double>>>& supplied) {
  const bool from_tag = options.group_filter_tag.has_value();
  const std::string source = from_tag ? "tag:" + *options.group_filter_tag : "metric:" + *options.group_filter_metric;
  if (source != source_ || partition.number() != partition_number_) {
    classification_.clear();
    source_ = source;
    partition_number_ = partition.number();
  }
  std::unordered_set<std::string_view> finished;
  for (const ReplayPrompt& prompt : groups.prompts()) {
    if (prompt.status == PromptStatus::kFinished) finished.insert(prompt.uid);
  }
  std::erase_if(classification_, [&](const auto& entry) { return finished.count(entry.first) == 0; });
  std::unordered_map<std::string_view, const std::vector<double>*> supplied_values;
  for (const auto& [uid, values] : supplied) supplied_values[uid] = &values;

  GroupFilterAnswer answer;
  std::vector<std::string> missing;
  for (const ReplayPrompt& prompt : groups.prompts()) {
    const std::string uid(prompt.uid);
    if (prompt.status != PromptStatus::kFinished || classification_.count(uid) > 0) continue;
    const std::vector<ReplayTrajectory>* found = groups.trajectories(prompt.uid);
    if (found == nullptr) {
      missing.push_back(uid);
      continue;
    }
    std::optional<std::vector<double>> values;
    if (!from_tag) {
      const auto given = supplied_values.find(uid);
      if (given != supplied_values.end() && given->second->size() == found->size()) values = *given->second;
      if (!values) {  // none yet, or not one per trajectory (one arrived since): asked for again
        answer.unclassified_uids.push_back(uid);
        for (const ReplayTrajectory& trajectory : *found) {
          answer.unclassified_keys.push_back(*partition.key_of(trajectory.slot));
        }
        continue;
      }
    } else if (!(values = tag_values(partition, *found, *options.group_filter_tag))) {
      missing.push_back(uid);
      continue;
    }
    classification_[uid] = shared_value(*values);
  }
  if (!missing.empty()) {
    std::sort(missing.begin(), missing.end());
    std::string names;
    for (size_t i = 0; i < std::min<size_t>(missing.size(), 5); ++i) names += (i ? ", '" : "'") + missing[i] + "'";
    throw_invalid("finished groups are missing " +
                  (from_tag ? "the group filter tag '" + *options.group_filter_tag + "' (a number on every trajectory)"
                            : "trajectories (the values of group_filter_metric '" + *options.group_filter_metric +
                                  "' come from them)") +
                  ": " + names);
  }
  for (const ReplayPrompt& prompt : groups.prompts()) {
    if (prompt.status != PromptStatus::kFinished) continue;
    const auto classified = classification_.find(std::string(prompt.uid));
    if (classified == classification_.end()) continue;  // unclassified
    if (const std::optional<double>& value = classified->second) {
      answer.filtered.emplace_back(classified->first, *value);
    }
  }
  return answer;
}

}  // namespace seqflow::core
