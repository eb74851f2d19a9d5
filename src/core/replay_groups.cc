// A pass's groups, and the DAPO classification of its finished ones.
#include "core/replay_groups.h"

#include <algorithm>
#include <array>
#include <span>
#include <string_view>
#include <unordered_set>

#include "core/custom_meta.h"
#include "core/replay_index.h"
#include "seqflow/error.h"

namespace seqflow::core {
namespace {

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

MemberStatus member_status_of(const Value& tag) {
  const Value* status = tag.find("status");
  if (status == nullptr) return MemberStatus::kFinished;
  if (!status->is_string()) return MemberStatus::kUnknown;
  const std::string& name = status->as_string();
  if (name == "pending" || name == "running") return MemberStatus::kInFlight;
  if (name == "finished") return MemberStatus::kFinished;
  if (name == "failed" || name == "failure" || name == "aborted") return MemberStatus::kLeftOut;
  return MemberStatus::kUnknown;
}

void throw_unknown_member_statuses(std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  std::string names;
  for (size_t i = 0; i < std::min<size_t>(keys.size(), 5); ++i) names += (i ? ", '" : "'") + keys[i] + "'";
  throw_invalid(
      "with member_status, every trajectory's tag status is 'pending', 'running', 'finished', 'failed' "
      "(or 'failure') or 'aborted', or absent (finished); not so for " +
      names);
}

std::vector<ReplayTrajectory> ReplayGroups::trajectories(std::string_view uid) const {
  return index_ != nullptr ? index_->trajectories(uid) : std::vector<ReplayTrajectory>{};
}

std::vector<ReplayTrajectory> ReplayGroups::served_trajectories(std::string_view uid, bool member_status) const {
  std::vector<ReplayTrajectory> found = trajectories(uid);
  if (member_status) std::erase_if(found, [](const auto& t) { return t.status == MemberStatus::kLeftOut; });
  return found;
}

template <typename Predicate>
void ReplayGroups::move_in_flight(Predicate in_flight) {
  std::erase_if(terminal_, [&](const ReplayPrompt& prompt) {
    if (!in_flight(prompt)) return false;
    ++in_flight_;
    oldest_in_flight_ = std::min(oldest_in_flight_.value_or(prompt.global_steps), prompt.global_steps);
    if (const std::optional<int64_t> start = prompt.start_version) {
      oldest_in_flight_start_ = std::min(oldest_in_flight_start_.value_or(*start), *start);
    }
    return true;
  });
}

void ReplayGroups::hold_in_flight(const std::vector<std::string>& uids) {
  if (uids.empty()) return;
  const std::unordered_set<std::string_view> held(uids.begin(), uids.end());
  move_in_flight([&](const ReplayPrompt& prompt) {
    return prompt.status == PromptStatus::kFinished && held.count(prompt.uid) > 0;
  });
}

void ReplayGroups::apply_member_status(const PartitionState& partition) {
  std::vector<std::string> unknown;
  for (ReplayPrompt& prompt : terminal_) {
    if (prompt.members_unknown > 0) {
      for (const ReplayTrajectory& trajectory : trajectories(prompt.uid)) {
        if (trajectory.status == MemberStatus::kUnknown) unknown.push_back(*partition.key_of(trajectory.slot));
      }
    }
    if (prompt.status == PromptStatus::kFinished && prompt.members > 0 && prompt.members_left_out == prompt.members) {
      prompt.status = PromptStatus::kFailure;
    }
  }
  if (!unknown.empty()) throw_unknown_member_statuses(std::move(unknown));
  move_in_flight([](const ReplayPrompt& prompt) { return prompt.members_in_flight > 0; });
}

GroupFilterAnswer GroupFilterCache::filtered(const PartitionState& partition, const ReplayGroups& groups,
                                             const ReplayOptions& options,
                                             const std::vector<std::pair<std::string, std::vector<double>>>& supplied) {
  const bool from_tag = options.group_filter_tag.has_value();
  const std::string source =
      (from_tag ? "tag:" + *options.group_filter_tag : "metric:" + *options.group_filter_metric) +
      (options.member_status ? "+members" : "");
  if (source != source_ || partition.number() != partition_number_) {
    classification_.clear();
    member_stamps_.clear();
    source_ = source;
    partition_number_ = partition.number();
  }
  std::unordered_set<std::string_view> finished;
  for (const ReplayPrompt& prompt : groups.terminal()) {
    if (prompt.status == PromptStatus::kFinished) finished.insert(prompt.uid);
  }
  std::erase_if(classification_, [&](const auto& entry) { return finished.count(entry.first) == 0; });
  std::erase_if(member_stamps_, [&](const auto& entry) { return finished.count(entry.first) == 0; });
  if (options.member_status) {
    for (const ReplayPrompt& prompt : groups.terminal()) {
      const auto stamp = member_stamps_.find(std::string(prompt.uid));
      if (stamp != member_stamps_.end() && stamp->second != prompt.member_stamp) {
        classification_.erase(stamp->first);  // its members changed: classified again
        member_stamps_.erase(stamp);
      }
    }
  }
  std::unordered_map<std::string_view, const std::vector<double>*> supplied_values;
  for (const auto& [uid, values] : supplied) supplied_values[uid] = &values;

  GroupFilterAnswer answer;
  std::vector<std::string> missing;
  for (const ReplayPrompt& prompt : groups.terminal()) {
    const std::string uid(prompt.uid);
    if (prompt.status != PromptStatus::kFinished || classification_.count(uid) > 0) continue;
    const std::vector<ReplayTrajectory> found = groups.served_trajectories(prompt.uid, options.member_status);
    if (found.empty()) {
      missing.push_back(uid);
      continue;
    }
    std::optional<std::vector<double>> values;
    if (!from_tag) {
      const auto given = supplied_values.find(uid);
      if (given != supplied_values.end() && given->second->size() == found.size()) values = *given->second;
      if (!values) {  // none yet, or not one per trajectory (one arrived since): asked for again
        answer.unclassified_uids.push_back(uid);
        for (const ReplayTrajectory& trajectory : found) {
          answer.unclassified_keys.push_back(*partition.key_of(trajectory.slot));
        }
        continue;
      }
    } else if (!(values = tag_values(partition, found, *options.group_filter_tag))) {
      missing.push_back(uid);
      continue;
    }
    classification_[uid] = shared_value(*values);
    if (options.member_status) member_stamps_[uid] = prompt.member_stamp;
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
  for (const ReplayPrompt& prompt : groups.terminal()) {
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
