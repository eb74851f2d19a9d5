// The key-value API: a key names one sample of a partition; its tag is that
// sample's custom_meta, so samplers read total_lengths from tags too.
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/batch_meta_builder.h"
#include "core/controller_state.h"
#include "core/insert_undo.h"
#include "core/name_rule.h"
#include "core/meta_update.h"
#include "seqflow/controller.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

using core::PartitionState;

void check_keys(std::span<const std::string> keys) {
  for (size_t i = 0; i < keys.size(); ++i) {
    core::check_name(keys[i], "keys[" + std::to_string(i) + "]");
  }
}

// Every key's slot; throws kNotFound naming the first missing key.
std::vector<uint32_t> require_keys(const PartitionState& partition, std::span<const std::string> keys) {
  std::vector<uint32_t> slots;
  slots.reserve(keys.size());
  for (const std::string& key : keys) {
    auto slot = partition.key_slot(key);
    if (!slot) {
      throw Error(ErrorCode::kNotFound, "key '" + key + "' does not exist in partition '" + partition.name() + "'");
    }
    slots.push_back(*slot);
  }
  return slots;
}

// New custom metadata of known samples: applied whole, and undone whole
// unless committed (each trade cannot fail, so neither can the undo).
class KnownMetaSwap {
 public:
  KnownMetaSwap() = default;
  KnownMetaSwap(const KnownMetaSwap&) = delete;
  KnownMetaSwap& operator=(const KnownMetaSwap&) = delete;
  ~KnownMetaSwap() {
    if (partition_ == nullptr || committed_) return;
    // Backwards: a sample named twice gets its first value back last.
    for (auto swap = swaps_.rbegin(); swap != swaps_.rend(); ++swap) partition_->swap_meta(swap->first, swap->second);
  }

  void add(uint32_t slot, PartitionState::StoredMeta meta) { swaps_.emplace_back(slot, std::move(meta)); }
  void apply(PartitionState& partition) noexcept {
    partition_ = &partition;
    for (auto& [slot, meta] : swaps_) partition.swap_meta(slot, meta);
  }
  void commit() { committed_ = true; }

 private:
  std::vector<std::pair<uint32_t, PartitionState::StoredMeta>> swaps_;
  PartitionState* partition_ = nullptr;
  bool committed_ = false;
};

}  // namespace

BatchMeta Controller::kv_resolve(const std::string& partition_id, std::span<const std::string> keys,
                                 std::span<const Value> tags, bool* created, std::vector<uint8_t>* made_keys) {
  core::check_name(partition_id, "partition_id");
  check_keys(keys);
  core::check_tags(keys, tags);

  std::unique_lock lock(state_->mutex);
  PartitionState* existing = state_->data.find(partition_id);
  if (created) *created = existing == nullptr && !keys.empty();
  // Keys not yet known, first occurrence each, in the order given.
  // (Hash sets, not scans: a call may carry 100k keys.)
  std::vector<std::string> fresh;
  std::unordered_set<std::string_view> fresh_seen;
  for (const std::string& key : keys) {
    const bool known = existing != nullptr && existing->key_slot(key).has_value();
    if (!known && fresh_seen.insert(key).second) fresh.push_back(key);
  }
  // Check every tag before anything changes: known keys merge into their
  // metadata, new keys start from their tag alone.
  std::vector<uint32_t> known_slots;
  std::vector<int64_t> known_indexes;
  std::vector<Value> known_tags;
  std::vector<std::pair<std::string, core::EncodedMeta>> fresh_meta;
  std::unordered_map<std::string_view, size_t> fresh_meta_at;  // key -> its entry in fresh_meta
  for (size_t i = 0; i < tags.size(); ++i) {
    if (tags[i].is_null() || tags[i].empty()) continue;
    auto slot = existing != nullptr ? existing->key_slot(keys[i]) : std::nullopt;
    if (slot) {
      known_slots.push_back(*slot);
      known_indexes.push_back(existing->global_index(*slot));
      known_tags.push_back(tags[i]);
    } else {
      auto [at, first] = fresh_meta_at.try_emplace(keys[i], fresh_meta.size());
      Value merged =
          first ? tags[i] : core::merge_meta(core::decode_meta(fresh_meta[at->second].second.bytes), tags[i]);
      auto encoded = core::encode_meta(merged, core::tag_where(i, keys[i]));
      if (first) {
        fresh_meta.emplace_back(keys[i], std::move(encoded));
      } else {
        fresh_meta[at->second].second = std::move(encoded);
      }
    }
  }
  // Known keys' merged metadata as stored, so that setting it cannot fail.
  KnownMetaSwap known_meta;
  if (existing != nullptr) {
    for (auto& [slot, meta] : core::prepare_meta(*existing, known_slots, known_indexes, known_tags,
                                                 core::encode_updates(known_indexes, known_tags))) {
      known_meta.add(slot, existing->stored(std::move(meta)));
    }
  }

  if (!fresh.empty()) core::check_sample_count(static_cast<int64_t>(fresh.size()), "new keys");
  core::InsertUndo undo(state_->data, partition_id);
  PartitionState& partition = state_->data.find_or_create(partition_id);
  std::vector<uint32_t> fresh_slots;
  if (!fresh.empty()) {
    const core::NewSamples& added = undo.added(state_->data.add_samples(partition, static_cast<int64_t>(fresh.size())));
    for (size_t i = 0; i < fresh.size(); ++i) partition.set_key(fresh[i], added.slots[i]);
    fresh_slots = added.slots;
  }
  for (auto& [key, meta] : fresh_meta) partition.set_meta(*partition.key_slot(key), std::move(meta));
  known_meta.apply(partition);  // undone unless the call completes (out of memory building the answer, say)
  BatchMeta resolved = core::collect_batch(state_->data, partition, require_keys(partition, keys));
  if (made_keys) {
    made_keys->assign(keys.size(), 0);
    for (size_t i = 0; i < keys.size(); ++i) (*made_keys)[i] = fresh_seen.count(keys[i]) > 0 ? 1 : 0;
  }
  undo.commit();
  known_meta.commit();
  state_->change_logs.record(partition_id, partition, ChangeKind::kInserted, fresh_slots, true);
  state_->change_logs.record(partition_id, partition, ChangeKind::kTagged, known_slots, true);
  state_->notify_changed(&partition_id);
  return resolved;
}

BatchMeta Controller::kv_lookup(const std::string& partition_id, std::span<const std::string> keys) const {
  std::unique_lock lock(state_->mutex);
  const PartitionState& partition = state_->data.require(partition_id);
  return core::collect_batch(state_->data, partition, require_keys(partition, keys));
}

BatchMeta Controller::kv_find(const std::string& partition_id, std::span<const std::string> keys) const {
  std::unique_lock lock(state_->mutex);
  const PartitionState* partition = state_->data.find(partition_id);
  if (partition == nullptr) return BatchMeta{};
  std::vector<uint32_t> slots;
  slots.reserve(keys.size());
  for (const std::string& key : keys) {
    if (auto slot = partition->key_slot(key)) slots.push_back(*slot);
  }
  return core::collect_batch(state_->data, *partition, slots);
}

std::vector<std::string> Controller::kv_keys(const std::string& partition_id,
                                             std::span<const int64_t> global_indexes) const {
  std::unique_lock lock(state_->mutex);
  const PartitionState& partition = state_->data.require(partition_id);
  std::vector<std::string> keys;
  keys.reserve(global_indexes.size());
  for (int64_t index : global_indexes) {
    const auto slot = state_->data.slot_of(partition, index);
    const std::string* key = slot ? partition.key_of(*slot) : nullptr;
    if (key == nullptr) {
      throw Error(ErrorCode::kNotFound,
                  "global index " + std::to_string(index) + " has no key in partition '" + partition_id + "'");
    }
    keys.push_back(*key);
  }
  return keys;
}

std::vector<PartitionKeys> Controller::kv_list(const std::string* partition_id) const {
  return kv_list(partition_id, {});
}

std::vector<PartitionKeys> Controller::kv_list(const std::string* partition_id,
                                               const std::map<std::string, ListingVersion>& known) const {
  std::lock_guard lock(state_->mutex);
  std::vector<PartitionKeys> out;
  // Keys in the order they were made (their samples' arrival order), as
  // TransferQueue lists them.
  auto list = [&](const PartitionState& partition) {
    if (auto it = known.find(partition.name()); it != known.end() && it->second == partition.listing_version()) {
      out.push_back(PartitionKeys::unchanged(partition.name(), partition.listing_version()));
      return;
    }
    PartitionKeys& entry = out.emplace_back(partition.name());
    entry.set_version(partition.listing_version());
    // Sized first: buffers of megabytes that grow by doubling cost more in
    // copies and page faults than a second walk.
    size_t key_bytes = 0, tag_bytes = 0;
    for (uint32_t slot = partition.first(); slot != core::kNoSlot; slot = partition.next(slot)) {
      if (const std::string* key = partition.key_of(slot)) {
        key_bytes += key->size();
        tag_bytes += partition.meta_bytes(slot).size();
      }
    }
    entry.reserve(partition.key_count(), key_bytes, tag_bytes);
    for (uint32_t slot = partition.first(); slot != core::kNoSlot; slot = partition.next(slot)) {
      if (const std::string* key = partition.key_of(slot)) entry.push_back(*key, partition.meta_bytes(slot));
    }
  };
  if (partition_id != nullptr) {
    if (const PartitionState* partition = state_->data.find(*partition_id)) list(*partition);
  } else {
    for (const PartitionState* partition : state_->data.in_creation_order()) list(*partition);
  }
  return out;
}

std::vector<int64_t> Controller::kv_clear(const std::string& partition_id, std::span<const std::string> keys) {
  check_keys(keys);
  std::lock_guard lock(state_->mutex);
  PartitionState* partition = state_->data.find(partition_id);
  if (partition == nullptr) return {};
  std::vector<uint32_t> slots;
  slots.reserve(keys.size());
  for (const std::string& key : keys) {
    if (auto slot = partition->key_slot(key)) slots.push_back(*slot);
  }
  auto cleared = state_->change_logs.describe(partition_id, *partition, ChangeKind::kCleared, slots, false,
                                              core::ChangeLogs::Clock::now());
  std::vector<int64_t> released = state_->data.remove_samples(*partition, std::move(slots));
  state_->change_logs.append(partition_id, std::move(cleared));
  state_->leases.forget_samples(partition_id, released);
  state_->notify_changed(&partition_id);
  return released;
}

}  // namespace seqflow
