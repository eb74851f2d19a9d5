// Controller: the trainer's policy version, and the versions each sample
// started and finished at.
#include <string>

#include "core/controller_state.h"
#include "core/name_rule.h"
#include "seqflow/error.h"

namespace seqflow {

namespace {

void add_versions(PolicyVersions& out, const core::SampleVersions& versions) {
  out.start.push_back(versions.start);
  out.finish.push_back(versions.finish);
}

PolicyVersions reserved(size_t samples) {
  PolicyVersions out;
  out.start.reserve(samples);
  out.finish.reserve(samples);
  return out;
}

}  // namespace

void Controller::set_policy_version(int64_t version) {
  core::check_policy_version(version);
  std::lock_guard lock(state_->mutex);
  const int64_t current = state_->data.policy_version();
  if (version < current) {
    throw_invalid("version " + std::to_string(version) + " is below the current policy version " +
                  std::to_string(current) + ": policy versions never go back");
  }
  state_->data.set_policy_version(version);
}

int64_t Controller::policy_version() const {
  std::lock_guard lock(state_->mutex);
  return state_->data.policy_version();
}

PolicyVersions Controller::policy_versions(const std::string& partition_id,
                                           std::span<const int64_t> global_indexes) const {
  core::check_name(partition_id, "partition_id");  // named as the other calls name it, not echoed as is
  std::lock_guard lock(state_->mutex);
  const core::PartitionState& partition = state_->data.require(partition_id);
  PolicyVersions out = reserved(global_indexes.size());
  for (const int64_t index : global_indexes) {
    const auto slot = state_->data.slot_of(partition, index);
    if (!slot) {
      throw Error(ErrorCode::kNotFound,
                  "global index " + std::to_string(index) + " is no sample of partition '" + partition_id + "'");
    }
    add_versions(out, partition.versions(*slot));
  }
  return out;
}

PolicyVersions Controller::kv_policy_versions(const std::string& partition_id,
                                              std::span<const std::string> keys) const {
  core::check_name(partition_id, "partition_id");
  for (size_t i = 0; i < keys.size(); ++i) core::check_name(keys[i], "keys[" + std::to_string(i) + "]");
  std::lock_guard lock(state_->mutex);
  const core::PartitionState& partition = state_->data.require(partition_id);
  PolicyVersions out = reserved(keys.size());
  for (const std::string& key : keys) {
    const auto slot = partition.key_slot(key);
    if (!slot) throw Error(ErrorCode::kNotFound, "key '" + key + "' is unknown in partition '" + partition_id + "'");
    add_versions(out, partition.versions(*slot));
  }
  return out;
}

}  // namespace seqflow
