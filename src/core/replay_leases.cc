#include "core/replay_leases.h"

#include <algorithm>

#include "seqflow/error.h"

namespace seqflow::core {

const ReplayLeases::Kept* ReplayLeases::find(const std::string& partition_id, uint64_t pass_id) const {
  const auto found = kept_.find({partition_id, pass_id});
  return found == kept_.end() ? nullptr : &found->second;
}

void ReplayLeases::check_room() const {
  const size_t unacknowledged = kept_.size() - acknowledged_;
  if (unacknowledged >= kMaxKeptReplayPasses) {
    throw_invalid("pass_id: " + std::to_string(unacknowledged) + " replay passes are kept unacknowledged, at most " +
                  std::to_string(kMaxKeptReplayPasses) +
                  "; acknowledge them (ack_replay_pass) or wait for their leases to end");
  }
  if (acknowledged_ >= kMaxAcknowledgedReplayPasses) {
    throw_invalid("pass_id: " + std::to_string(acknowledged_) + " acknowledged replay passes are kept, at most " +
                  std::to_string(kMaxAcknowledgedReplayPasses) + "; wait for their leases to end (shorter leases)");
  }
}

void ReplayLeases::keep(const std::string& partition_id, uint64_t pass_id, Kept kept) {
  if (!kept.held.empty()) {
    Held& held = held_[partition_id];
    for (const Prompt& prompt : kept.held) held[prompt.global_index] = prompt.generation;
  }
  Id id{partition_id, pass_id};
  if (const auto old = kept_.find(id); old != kept_.end()) by_expiry_.erase({old->second.expiry, id});
  const auto expiry = by_expiry_.emplace(kept.expiry, id).first;
  try {
    kept_.insert_or_assign(std::move(id), std::move(kept));
  } catch (...) {
    by_expiry_.erase(expiry);
    throw;
  }
}

void ReplayLeases::restore(const std::string& partition_id, uint64_t pass_id, Kept kept) {
  if (kept.acknowledged) ++acknowledged_;
  keep(partition_id, pass_id, std::move(kept));
}

const ReplayLeases::Held* ReplayLeases::held(const std::string& partition_id) const {
  const auto found = held_.find(partition_id);
  return found == held_.end() ? nullptr : &found->second;
}

std::optional<std::vector<ReplayLeases::Prompt>> ReplayLeases::acknowledge(const std::string& partition_id,
                                                                           uint64_t pass_id) {
  const auto found = kept_.find({partition_id, pass_id});
  if (found == kept_.end()) return std::nullopt;
  Kept& kept = found->second;
  if (kept.acknowledged) return std::vector<Prompt>{};
  std::vector<Prompt> prompts = std::move(kept.held);
  kept.held.clear();
  kept.answer = {};  // only the acknowledgement is kept, until the lease ends, for an acknowledgement sent again
  kept.acknowledged = true;
  auto expiry = by_expiry_.extract({kept.expiry, found->first});  // moved, not allocated again
  kept.expiry = std::min(kept.expiry, Clock::now() + kAcknowledgedReplayPassKept);
  expiry.value().first = kept.expiry;
  by_expiry_.insert(std::move(expiry));
  ++acknowledged_;
  release(partition_id, prompts);
  return prompts;
}

std::vector<std::pair<std::string, std::vector<ReplayLeases::Prompt>>> ReplayLeases::expire(Clock::time_point now) {
  std::vector<std::pair<std::string, std::vector<Prompt>>> released;
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) {
    const auto kept = kept_.find(by_expiry_.begin()->second);
    release(kept->first.first, kept->second.held);
    if (!kept->second.held.empty()) released.emplace_back(kept->first.first, std::move(kept->second.held));
    if (kept->second.acknowledged) --acknowledged_;
    kept_.erase(kept);
    by_expiry_.erase(by_expiry_.begin());
  }
  return released;
}

std::optional<ReplayLeases::Clock::time_point> ReplayLeases::next_expiry() const {
  if (by_expiry_.empty()) return std::nullopt;
  return by_expiry_.begin()->first;
}

void ReplayLeases::release(const std::string& partition_id, const std::vector<Prompt>& prompts) {
  if (prompts.empty()) return;
  const auto held = held_.find(partition_id);
  if (held == held_.end()) return;
  for (const Prompt& prompt : prompts) {
    const auto entry = held->second.find(prompt.global_index);
    if (entry != held->second.end() && entry->second == prompt.generation) held->second.erase(entry);
  }
  if (held->second.empty()) held_.erase(held);
}

}  // namespace seqflow::core
