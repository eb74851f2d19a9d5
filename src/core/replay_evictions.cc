// ReplayEvictions: what the passes of one sample() evicted, and verl's
// metric names for it.
#include <algorithm>

#include "common/checked_math.h"
#include "seqflow/replay.h"

namespace seqflow {

void ReplayEvictions::add(const ReplayEvictions& other) {
  if (other.stale > 0) {
    stale_span_max = stale > 0 ? std::max(stale_span_max, other.stale_span_max) : other.stale_span_max;
    stale_span_min = stale > 0 ? std::min(stale_span_min, other.stale_span_min) : other.stale_span_min;
    stale += other.stale;
    stale_span_sum = checked_add(stale_span_sum, other.stale_span_sum).value_or(INT64_MAX);
  }
  filtered += other.filtered;
  for (const auto& [value, groups] : other.filtered_values) {
    auto same = std::find_if(filtered_values.begin(), filtered_values.end(),
                             [value = value](const auto& entry) { return entry.first == value; });
    if (same == filtered_values.end()) {
      filtered_values.emplace_back(value, groups);
    } else {
      same->second += groups;
    }
  }
  failed += other.failed;
  surplus += other.surplus;
  if (other.stale_versions > 0) {
    stale_versions_age_max = std::max(stale_versions > 0 ? stale_versions_age_max : 0, other.stale_versions_age_max);
    stale_versions += other.stale_versions;
  }
  left_out_members += other.left_out_members;
}

std::vector<std::pair<std::string, double>> ReplayEvictions::metrics(const std::string& prefix) const {
  std::vector<std::pair<std::string, double>> named;
  auto name = [&](const char* metric, double value) { named.emplace_back(prefix + "/" + metric, value); };
  if (stale > 0) {
    name("off_policy/evicted_samples", static_cast<double>(stale));
    name("off_policy/evicted_samples_staleness/mean", static_cast<double>(stale_span_sum) / static_cast<double>(stale));
    name("off_policy/evicted_samples_staleness/max", static_cast<double>(stale_span_max));
    name("off_policy/evicted_samples_staleness/min", static_cast<double>(stale_span_min));
  }
  if (filtered > 0) name("filter_groups/evicted_samples", static_cast<double>(filtered));
  if (failed > 0) name("rollout_failure/evicted_samples", static_cast<double>(failed));
  if (surplus > 0) name("filter_groups/discarded_surplus_samples", static_cast<double>(surplus));
  if (stale_versions > 0) {  // seqflow's: verl has no policy versions
    name("off_policy/version_evicted_samples", static_cast<double>(stale_versions));
    name("off_policy/version_evicted_samples_age/max", static_cast<double>(stale_versions_age_max));
  }
  if (left_out_members > 0) {  // seqflow's: verl has no member statuses
    name("rollout_failure/left_out_trajectories", static_cast<double>(left_out_members));
  }
  return named;
}

}  // namespace seqflow
