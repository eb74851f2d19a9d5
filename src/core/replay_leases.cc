#include "core/replay_leases.h"

#include <algorithm>
#include <cassert>

#include "seqflow/error.h"

namespace seqflow::core {

const ReplayLeases::Kept* ReplayLeases::find(const std::string& partition_id, uint64_t pass_id) const {
  const auto found = kept_.find({partition_id, pass_id});
  return found == kept_.end() ? nullptr : &found->second;
}

ReplayLeases::Kept* ReplayLeases::find(const std::string& partition_id, uint64_t pass_id) {
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

ReplayLeases::Staged ReplayLeases::stage(const std::string& partition_id, uint64_t pass_id, Kept kept) {
  Id id{partition_id, pass_id};
  if (kept_.count(id) != 0) {
    throw Error(ErrorCode::kInternal, "replay pass " + std::to_string(pass_id) + " of partition '" + partition_id +
                                          "' is kept already: it is answered again, not kept twice");
  }
  // Each node is made in a map of its own and taken out of it, to be linked
  // into the leases' maps without allocating.
  Staged staged;
  Held held;
  held.reserve(kept.held.size());
  for (const Prompt& prompt : kept.held) held.insert_or_assign(prompt.global_index, prompt.generation);
  if (!held.empty()) {
    if (const auto found = held_.find(partition_id); found != held_.end()) {
      found->second.reserve(found->second.size() + held.size());  // capacity only: no prompt held yet
      staged.more_held_ = std::move(held);
    } else {
      HeldByPartition node;
      staged.new_held_ = node.extract(node.emplace(partition_id, std::move(held)).first);
    }
  }
  ExpiryIndex expiry;
  staged.expiry_ = expiry.extract(expiry.emplace(kept.expiry, id).first);
  KeptPasses pass;
  staged.pass_ = pass.extract(pass.emplace(std::move(id), std::move(kept)).first);
  return staged;
}

void ReplayLeases::keep(Staged staged) noexcept {
  if (staged.new_held_) {
    [[maybe_unused]] const bool inserted = held_.insert(std::move(staged.new_held_)).inserted;
    assert(inserted && "the partition held no prompt when the pass was staged");
  } else if (!staged.more_held_.empty()) {
    const auto found = held_.find(staged.pass_.key().first);
    assert(found != held_.end() && "the partition held prompts when the pass was staged");
    Held& held = found->second;
    held.merge(staged.more_held_);  // within the reserved room: no rehash
    for (const auto& [index, generation] : staged.more_held_) held.find(index)->second = generation;  // held before
  }
  const auto expiry_entry = by_expiry_.insert(std::move(staged.expiry_)).position;
  kept_.insert(std::move(staged.pass_)).position->second.expiry_entry = expiry_entry;
}

void ReplayLeases::restore(const std::string& partition_id, uint64_t pass_id, Kept kept) {
  const bool acknowledged = kept.acknowledged;
  keep(stage(partition_id, pass_id, std::move(kept)));
  if (acknowledged) ++acknowledged_;
}

const ReplayLeases::Held* ReplayLeases::held(const std::string& partition_id) const {
  const auto found = held_.find(partition_id);
  return found == held_.end() ? nullptr : &found->second;
}

void ReplayLeases::acknowledge(Kept& kept) noexcept {
  if (kept.acknowledged) return;
  const std::vector<Prompt> prompts = std::move(kept.held);
  kept.held.clear();
  kept.answer = {};  // only the acknowledgement is kept, until the lease ends, for an acknowledgement sent again
  kept.acknowledged = true;
  auto expiry = by_expiry_.extract(kept.expiry_entry);  // moved by its position: no key is built
  kept.expiry = std::min(kept.expiry, Clock::now() + kAcknowledgedReplayPassKept);
  expiry.value().first = kept.expiry;
  kept.expiry_entry = by_expiry_.insert(std::move(expiry)).position;
  ++acknowledged_;
  release(kept.expiry_entry->second.first, prompts);
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
