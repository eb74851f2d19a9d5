// Everything the controller knows about one partition, stored by column over
// slots (a slot is a sample's place in the partition; freed slots are reused):
// production as a bitset per sample over the partition's field table,
// consumption per task, custom metadata as compact bytes, and KV keys.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/amortized_reserve.h"
#include "core/custom_meta.h"
#include "core/slot_list.h"
#include "core/task_queue.h"
#include "seqflow/controller.h"

namespace seqflow::core {

// Which fields, as bits over the field table (one word per 64 fields).
using FieldMask = std::vector<uint64_t>;

// The policy versions of one sample (Controller::set_policy_version): the
// current one when it was inserted, and when a put last left it with every
// field of its partition produced (kUnfinished until then).
struct SampleVersions {
  static constexpr int64_t kUnfinished = -1;
  int64_t start = 0;
  int64_t finish = kUnfinished;
};

class PartitionState {
 public:
  static constexpr int64_t kNoLength = INT64_MIN;  // a sample without total_lengths

  PartitionState(std::string name, uint32_t number);

  const std::string& name() const { return name_; }
  // Distinguishes this partition from earlier ones of the same name.
  uint32_t number() const { return number_; }
  size_t size() const { return live_.size(); }

  // --- samples, in arrival order ---
  uint32_t new_put_id() { return next_put_id_++; }
  // Checkpoint load: later puts get ids above `id`.
  void note_put_id(uint32_t id) { next_put_id_ = std::max(next_put_id_, id + 1); }
  // Makes room for `count` more samples, so that adding them cannot fail.
  void reserve_samples(size_t count);
  // A new live sample: the newest, unconsumed by every task, started at
  // policy version `start_version`, unfinished.
  uint32_t add_sample(int64_t global_index, uint32_t put_id, uint32_t put_pos, int64_t start_version);
  // Forgets the sample everywhere (arrival order, tasks, key) and frees the slot.
  void remove_sample(uint32_t slot);
  // Makes room to free `count` more slots, so that removing them cannot fail.
  void reserve_removals(size_t count) { amortized_reserve(free_slots_, free_slots_.size() + count); }
  int64_t global_index(uint32_t slot) const { return global_index_[slot]; }
  uint32_t first() const { return live_.head(); }  // then next() until kNoSlot
  uint32_t next(uint32_t slot) const { return live_.next(slot); }

  // --- fields ---
  std::optional<uint32_t> field_id(const std::string& name) const;
  size_t field_count() const { return field_names_.size(); }
  const std::string& field_name(uint32_t id) const { return field_names_[id]; }
  const FieldSchema& schema(uint32_t id) const { return schemas_[id]; }
  // Adds the field or replaces its schema.
  uint32_t set_field(const std::string& name, const FieldSchema& schema);
  // The field table (names, schemas), to put back when a change that set
  // fields fails; putting it back cannot fail (a bitset widened past 64
  // fields stays wide).
  struct FieldTable {
    std::vector<std::string> names;
    std::vector<FieldSchema> schemas;
    std::unordered_map<std::string, uint32_t> ids;
  };
  FieldTable field_table() const { return {field_names_, schemas_, field_ids_}; }
  void restore_field_table(FieldTable&& table) noexcept;
  bool produced(uint32_t slot, uint32_t field) const;
  void set_produced(uint32_t slot, uint32_t field);
  // Every field of the sample not produced; false if none was.
  bool clear_produced(uint32_t slot);
  // Nullopt when a field is unknown here: then no sample has them all.
  std::optional<FieldMask> mask(std::span<const std::string> fields) const;
  bool has_all(uint32_t slot, const FieldMask& mask) const;
  // Every field of the partition's table produced (allocates nothing).
  bool has_every_field(uint32_t slot) const noexcept;
  // Raw bits of one sample, for checkpoints: words_per_sample() words.
  std::span<const uint64_t> produced_words(uint32_t slot) const;
  void set_produced_words(uint32_t slot, std::span<const uint64_t> words);
  size_t words_per_sample() const { return stride_; }

  // --- write versions (see seqflow/field_versions.h) ---
  // The committed write the sample's field holds; 0: its first, unversioned one.
  uint64_t field_version(uint32_t slot, uint32_t field) const;
  void set_field_version(uint32_t slot, uint32_t field, uint64_t version);
  // The write whose tags the sample's custom_meta holds; 0: no versioned one.
  uint64_t meta_version(uint32_t slot) const;
  void set_meta_version(uint32_t slot, uint64_t version);
  // Sizes the versions of `field` (of custom_meta) for every slot, so that
  // setting one cannot fail; true if they were not sized before, and then
  // unsize_* puts them back (a failed change leaves them as they were).
  bool size_field_versions(uint32_t field);
  bool size_meta_versions();
  void unsize_field_versions(uint32_t field) noexcept { field_versions_[field].clear(); }
  void unsize_meta_versions() noexcept { meta_version_.clear(); }
  // False while no field of the partition was ever overwritten: gets skip versions.
  bool field_has_versions(uint32_t field) const {
    return field < field_versions_.size() && !field_versions_[field].empty();
  }

  // --- policy versions ---
  const SampleVersions& versions(uint32_t slot) const { return versions_[slot]; }
  void set_finish_version(uint32_t slot, int64_t version) noexcept { versions_[slot].finish = version; }
  void set_versions(uint32_t slot, SampleVersions versions) noexcept { versions_[slot] = versions; }

  // --- custom metadata ---
  const std::string& meta_bytes(uint32_t slot) const { return meta_[slot]; }
  void set_meta(uint32_t slot, EncodedMeta meta);
  // A sample's custom metadata as the partition stores it (its group interned).
  struct StoredMeta {
    std::string bytes;
    int64_t length = kNoLength;
    uint32_t group = 0;
  };
  // `meta` as stored, its group interned here (the one change; a throw leaves none).
  StoredMeta stored(EncodedMeta meta);
  // Trades the sample's custom metadata with `meta`: cannot fail, so a
  // change of many samples' metadata can be made, and undone, whole.
  void swap_meta(uint32_t slot, StoredMeta& meta) noexcept;
  std::optional<int64_t> length(uint32_t slot) const;
  // SampleInfo::group_key: group_id when set, else the run of n in its put.
  std::string group_key(uint32_t slot, int64_t n) const;
  uint32_t put_id(uint32_t slot) const { return put_id_[slot]; }
  uint32_t put_pos(uint32_t slot) const { return put_pos_[slot]; }

  // --- tasks ---
  // The task's queue; a new task starts with every live sample unconsumed.
  TaskQueue& task(const std::string& name);
  const TaskQueue* find_task(const std::string& name) const;
  void erase_task(const std::string& name) { tasks_.erase(name); }
  void erase_tasks() { tasks_.clear(); }
  const std::map<std::string, TaskQueue>& tasks() const { return tasks_; }

  // --- KV keys: a key names one sample ---
  std::optional<uint32_t> key_slot(const std::string& key) const;
  // The sample's key, or null when it has none.
  const std::string* key_of(uint32_t slot) const;
  void set_key(const std::string& key, uint32_t slot);
  size_t key_count() const { return key_slot_.size(); }
  // Changes with every key made or removed and every keyed sample's
  // custom_meta set (what kv_list shows).
  const ListingVersion& listing_version() const { return listing_version_; }
  // The listing change that last touched the slot's key or its tag (0:
  // none yet), so that a reader that parsed a tag knows when to parse it again.
  uint64_t keyed_change(uint32_t slot) const { return keyed_change_[slot]; }

  // --- keyed changes, in order, for one reader (the replay index) ---
  enum class KeyedChange : uint8_t {
    kKeyed,    // a fresh sample got its key: the newest keyed sample
    kTagged,   // a keyed sample's tag (or key) changed
    kUnkeyed,  // a keyed sample went away
  };
  struct KeyedEvent {
    uint32_t slot = 0;
    KeyedChange change = KeyedChange::kTagged;
  };
  // From now on the partition records its keyed changes, so that its reader
  // catches up by them instead of walking every sample.
  void record_keyed_changes() noexcept { recording_keyed_ = true; }
  // The changes since the last take; nullopt when they outgrew the
  // partition's size (or memory), so that the reader walks again instead.
  std::optional<std::vector<KeyedEvent>> take_keyed_changes();

 private:
  // Cannot fail: a change it cannot record makes the reader walk again.
  void record_keyed(uint32_t slot, KeyedChange change) noexcept;

  std::string name_;
  uint32_t number_;
  uint32_t next_put_id_ = 0;

  // Per slot.
  std::vector<int64_t> global_index_;
  SlotList live_;                   // arrival order of live samples
  std::vector<uint64_t> produced_;  // stride_ words per slot
  std::vector<std::string> meta_;   // MessagePack; empty means {}
  std::vector<int64_t> length_;     // total_lengths or kNoLength
  std::vector<uint32_t> group_;     // interned group_id + 1; 0: none
  std::vector<uint32_t> put_id_, put_pos_;
  std::vector<SampleVersions> versions_;
  std::vector<uint32_t> free_slots_;
  // Per field id, per slot; empty until a versioned write of the field (the
  // common path pays nothing). meta_version_ likewise per slot.
  std::vector<std::vector<uint64_t>> field_versions_;
  std::vector<uint64_t> meta_version_;

  size_t stride_ = 1;
  std::vector<std::string> field_names_;
  std::vector<FieldSchema> schemas_;
  std::unordered_map<std::string, uint32_t> field_ids_;

  // group_id texts, interned: most samples share one with n - 1 others.
  std::vector<std::string> group_names_;
  std::unordered_map<std::string, uint32_t> group_ids_;

  std::map<std::string, TaskQueue> tasks_;
  // Keys both ways: a lookup by key is a hash, a sample's key is its slot's
  // (empty: none, since keys are never empty), so listing 100k keys walks
  // arrays in arrival order, not a tree.
  std::unordered_map<std::string, uint32_t> key_slot_;
  std::vector<std::string> key_;
  std::vector<uint64_t> keyed_change_;  // per slot
  ListingVersion listing_version_;
  bool recording_keyed_ = false;
  bool keyed_overflow_ = false;  // changes were dropped since the last take
  std::vector<KeyedEvent> keyed_events_;
};

}  // namespace seqflow::core
