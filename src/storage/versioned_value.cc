#include "storage/versioned_value.h"

#include <iterator>
#include <utility>

namespace seqflow {

VersionedValue::VersionedValue(uint64_t version, SampleView view) {
  versions_.emplace(version, std::move(view));
  if (version == 0) committed_ = 0;
}

VersionedValue::Change VersionedValue::change_of_write(const VersionedValue& incoming) const {
  const auto& [version, view] = *incoming.versions_.begin();
  Change change;
  if (incoming.committed_) {  // unversioned: replaces the committed value
    if (committed_) {
      change.values_out = 1;
      change.bytes_out = versions_.find(*committed_)->second.nbytes;
    }
  } else if (committed_ && *committed_ >= version) {
    return change;  // lost already: ignored
  } else if (auto held = versions_.find(version); held != versions_.end()) {
    change.values_out = 1;  // a retry of the same write
    change.bytes_out = held->second.nbytes;
  }
  change.values_in = 1;
  change.bytes_in = view.nbytes;
  return change;
}

void VersionedValue::write(VersionedValue& incoming) noexcept {
  if (incoming.committed_) {
    // In place, under the committed version's number: staged writes stay, so
    // that a reader handed a version the controller committed (and this unit
    // has not yet been told of) still finds it.
    if (committed_) {
      std::swap(versions_.find(*committed_)->second, incoming.versions_.begin()->second);
    } else {
      versions_.insert(incoming.versions_.extract(incoming.versions_.begin()));
      committed_ = 0;
    }
    return;
  }
  const auto staged = incoming.versions_.begin();
  if (committed_ && *committed_ >= staged->first) return;
  if (auto held = versions_.find(staged->first); held != versions_.end()) {
    std::swap(held->second, staged->second);
    return;
  }
  versions_.insert(incoming.versions_.extract(staged));
}

std::optional<size_t> VersionedValue::drops_of_commit(uint64_t version) const {
  const auto at = versions_.find(version);
  if (at == versions_.end() || (committed_ && version <= *committed_)) return std::nullopt;
  return static_cast<size_t>(std::distance(versions_.begin(), at));
}

void VersionedValue::commit(uint64_t version, std::vector<Versions::node_type>& dropped) noexcept {
  const auto at = versions_.find(version);
  if (at == versions_.end() || (committed_ && version <= *committed_)) return;
  while (versions_.begin() != at) dropped.push_back(versions_.extract(versions_.begin()));
  committed_ = version;
}

std::optional<size_t> VersionedValue::drops_of_discard(uint64_t version) const {
  if (!versions_.contains(version) || (committed_ && version <= *committed_)) return std::nullopt;
  return 1;
}

void VersionedValue::discard(uint64_t version, std::vector<Versions::node_type>& dropped) noexcept {
  if (!drops_of_discard(version)) return;
  dropped.push_back(versions_.extract(version));
}

const SampleView* VersionedValue::read(uint64_t version) const {
  // A committed version at or above the one asked for is newer: it wins.
  if (committed_ && version <= *committed_) return &versions_.find(*committed_)->second;
  if (version == 0) return nullptr;
  const auto staged = versions_.find(version);
  return staged == versions_.end() ? nullptr : &staged->second;
}

uint64_t VersionedValue::bytes() const {
  uint64_t total = 0;
  for (const auto& [version, view] : versions_) total += view.nbytes;
  return total;
}

const char* VersionedValue::restore(uint64_t version, bool committed, SampleView view) {
  if (version == 0 && !committed) return "version 0 is not committed (an unversioned write is)";
  if (committed && committed_) return "two versions are committed";
  if (!versions_.emplace(version, std::move(view)).second) return "a version appears twice";
  if (committed) committed_ = version;
  return nullptr;
}

const char* VersionedValue::restored_problem() const {
  // A commit drops the older versions; an unversioned write replaces the committed one in place.
  if (committed_ && versions_.begin()->first != *committed_) return "a version older than the committed one is held";
  return nullptr;
}

}  // namespace seqflow
