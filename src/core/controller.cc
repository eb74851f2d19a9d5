// Controller: samples, production, custom metadata, clearing, resets and
// status queries. get_meta, the KV API and checkpoints have their own files.
#include "seqflow/controller.h"

#include <algorithm>
#include <new>
#include <unordered_set>
#include <string>

#include "core/batch_meta_builder.h"
#include "core/controller_state.h"
#include "core/field_schema_merge.h"
#include "core/insert_undo.h"
#include "core/meta_update.h"
#include "seqflow/error.h"

namespace seqflow {

using core::PartitionState;

MetaMode parse_meta_mode(std::string_view name) {
  if (name == "insert") return MetaMode::kInsert;
  if (name == "fetch") return MetaMode::kFetch;
  if (name == "force_fetch") return MetaMode::kForceFetch;
  throw_invalid("mode must be 'insert', 'fetch' or 'force_fetch', got '" + std::string(name) + "'");
}

namespace {

OnlineOptions task_workload_options(int64_t timing_alignment) {
  if (timing_alignment < 1) {
    throw_invalid("timing_alignment = " + std::to_string(timing_alignment) +
                  " must be >= 1 (1: no term for unaligned lengths)");
  }
  OnlineOptions options;
  options.calibration.alignment = timing_alignment;
  return options;
}

// What an overwrite's mark_produced will leave committed, worked out before
// it publishes anything (so that building the answer cannot fail after the
// write landed): per sample and field, the write's version where it wins
// (no newer write's value is produced there) and the newer one elsewhere;
// the tags a newer write left where the write's own do not land (on samples
// where none of its values lands, or whose tags are newer).
CommittedWrite predicted_commit(const core::PartitionState& partition, std::span<const uint32_t> slots,
                                const std::map<std::string, FieldSchema>& fields, bool wrote_meta,
                                uint64_t write_version) {
  CommittedWrite out;
  std::vector<uint8_t> lands(slots.size(), 0);
  for (const auto& [name, schema] : fields) {
    const std::optional<uint32_t> id = partition.field_id(name);
    std::vector<uint64_t>& versions = out.versions[name];
    versions.reserve(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      const bool newer =
          id && partition.produced(slots[i], *id) && write_version < partition.field_version(slots[i], *id);
      versions.push_back(newer ? partition.field_version(slots[i], *id) : write_version);
      if (!newer) lands[i] = 1;
    }
  }
  if (!wrote_meta) return out;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (lands[i] != 0 && write_version >= partition.meta_version(slots[i])) continue;
    out.newer_meta_positions.push_back(static_cast<int64_t>(i));
    out.newer_metas.push_back(core::decode_meta(partition.meta_bytes(slots[i])));
  }
  return out;
}

// Publishes a write's fields, production bits and metadata together. An
// overwrite's fields land only where no newer write's have; its tags only on
// samples where some of its fields landed and no newer write's tags did, so
// that a sample's tags and values come from one write. Whole or not at all:
// everything that can fail (the field table, the landing decisions, the
// versions' and the tags' storage) comes before the first change a reader
// could see, and is put back if it fails. A sample the write leaves with
// every field produced finishes at `policy_version`.
void publish_write(core::PartitionState& partition, std::span<const uint32_t> slots,
                   const std::vector<std::pair<const std::string*, FieldSchema>>& schemas,
                   std::vector<std::pair<uint32_t, core::EncodedMeta>> metas, uint64_t write_version,
                   int64_t policy_version) {
  const bool table_changes = std::any_of(schemas.begin(), schemas.end(), [&](const auto& entry) {
    const std::optional<uint32_t> id = partition.field_id(*entry.first);
    return !id || !(partition.schema(*id) == entry.second);
  });
  std::optional<core::PartitionState::FieldTable> table_before;
  if (table_changes) table_before = partition.field_table();
  std::vector<uint32_t> sized_fields;  // versions this write sized, unsized again if it fails
  bool sized_meta = false;
  std::vector<uint32_t> field_ids;
  std::vector<uint8_t> lands;    // per sample and field: the write's value lands there
  std::vector<uint32_t> landed;  // the slots where some field lands, sorted
  std::vector<std::pair<uint32_t, core::PartitionState::StoredMeta>> stored;
  try {
    field_ids.reserve(schemas.size());
    for (const auto& [name, schema] : schemas) {
      field_ids.push_back(table_changes ? partition.set_field(*name, schema) : *partition.field_id(*name));
    }
    lands.assign(slots.size() * field_ids.size(), 0);
    landed.reserve(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      for (size_t j = 0; j < field_ids.size(); ++j) {
        const uint32_t id = field_ids[j];
        const bool newer = write_version != 0 && partition.produced(slots[i], id) &&
                           write_version < partition.field_version(slots[i], id);
        if (newer) continue;
        lands[i * field_ids.size() + j] = 1;
        if (landed.empty() || landed.back() != slots[i]) landed.push_back(slots[i]);
      }
    }
    std::sort(landed.begin(), landed.end());
    if (write_version != 0) {
      sized_fields.reserve(field_ids.size());
      for (size_t j = 0; j < field_ids.size(); ++j) {
        if (partition.size_field_versions(field_ids[j])) sized_fields.push_back(field_ids[j]);
      }
      sized_meta = !metas.empty() && partition.size_meta_versions();
    }
    stored.reserve(metas.size());
    for (auto& [slot, meta] : metas) {
      if (write_version != 0 &&
          (!std::binary_search(landed.begin(), landed.end(), slot) || write_version < partition.meta_version(slot))) {
        continue;
      }
      stored.emplace_back(slot, partition.stored(std::move(meta)));
    }
  } catch (...) {
    for (uint32_t id : sized_fields) partition.unsize_field_versions(id);
    if (sized_meta) partition.unsize_meta_versions();
    if (table_before) partition.restore_field_table(std::move(*table_before));
    throw;
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    for (size_t j = 0; j < field_ids.size(); ++j) {
      if (lands[i * field_ids.size() + j] == 0) continue;
      partition.set_produced(slots[i], field_ids[j]);
      partition.set_field_version(slots[i], field_ids[j], write_version);
    }
  }
  for (uint32_t slot : landed) {
    if (partition.has_every_field(slot)) partition.set_finish_version(slot, policy_version);
  }
  for (auto& [slot, meta] : stored) {
    partition.swap_meta(slot, meta);
    if (write_version != 0) partition.set_meta_version(slot, write_version);
  }
}

}  // namespace

Controller::Controller(ControllerOptions options)
    : state_(std::make_unique<State>(task_workload_options(options.timing_alignment))) {
  state_->sampler = options.sampler ? std::move(options.sampler) : make_sequential_sampler();
  state_->polling_mode = options.polling_mode;
}

Controller::~Controller() = default;

BatchMeta Controller::insert(const std::string& partition_id, int64_t count, bool* created) {
  core::check_sample_count(count, "count");
  std::lock_guard lock(state_->mutex);
  core::InsertUndo undo(state_->data, partition_id);
  PartitionState& partition = state_->data.find_or_create(partition_id);
  const core::NewSamples& added = undo.added(state_->data.add_samples(partition, count));
  BatchMeta inserted = core::collect_batch(state_->data, partition, added.slots, std::span<const std::string>{});
  undo.commit();
  if (created) *created = undo.made_partition();
  state_->change_logs.record(partition_id, partition, ChangeKind::kInserted, added.slots, false);
  state_->notify_changed(&partition_id);
  return inserted;
}

CommittedWrite Controller::mark_produced(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                         std::span<const uint64_t> generations,
                                         const std::map<std::string, FieldSchema>& fields,
                                         std::span<const Value> custom_meta, uint64_t write_version) {
  for (const auto& [name, schema] : fields) core::check_schema(name, schema);
  // Checked and encoded before locking: the lock is held only to merge.
  std::vector<core::EncodedMeta> updates;
  if (!custom_meta.empty()) updates = core::encode_updates(global_indexes, custom_meta);

  std::lock_guard lock(state_->mutex);
  // Only versions this controller drew: a made-up huge one would win over every later write.
  if (write_version >= state_->data.indexes().next_generation()) {
    throw_invalid("write_version " + std::to_string(write_version) +
                  " was never handed out; take it from sample_production");
  }
  auto [found, slots] = state_->data.require_samples(partition_id, global_indexes, generations);
  PartitionState& partition = *found;
  std::vector<std::pair<const std::string*, FieldSchema>> schemas;
  for (const auto& [name, schema] : fields) {
    auto id = partition.field_id(name);
    schemas.emplace_back(&name, id ? core::merge_schema(name, partition.schema(*id), schema) : schema);
  }
  auto metas = custom_meta.empty()
                   ? std::vector<std::pair<uint32_t, core::EncodedMeta>>{}
                   : core::prepare_meta(partition, slots, global_indexes, custom_meta, std::move(updates));

  CommittedWrite committed = write_version == 0
                                 ? CommittedWrite{}
                                 : predicted_commit(partition, slots, fields, !custom_meta.empty(), write_version);
  publish_write(partition, slots, schemas, std::move(metas), write_version, state_->data.policy_version());
  state_->change_logs.record(partition_id, partition, ChangeKind::kProduced, slots, !custom_meta.empty());
  state_->notify_changed(&partition_id);
  return committed;
}

std::vector<int64_t> Controller::forget_production(const std::string* partition_id,
                                                   const std::function<bool(int64_t)>& lost) {
  if (!lost) throw_invalid("lost must select global indexes, got an empty function");
  std::lock_guard lock(state_->mutex);
  std::vector<PartitionState*> partitions;
  if (partition_id != nullptr) {
    partitions.push_back(&state_->data.require(*partition_id));
  } else {
    for (const auto& entry : state_->data.partitions()) partitions.push_back(entry.second.get());
  }
  // Selected first, changed after: a throwing `lost` changes nothing.
  std::vector<std::pair<PartitionState*, uint32_t>> selected;
  for (PartitionState* partition : partitions) {
    for (uint32_t slot = partition->first(); slot != core::kNoSlot; slot = partition->next(slot)) {
      if (lost(partition->global_index(slot))) selected.emplace_back(partition, slot);
    }
  }
  std::vector<int64_t> forgotten;
  forgotten.reserve(selected.size());
  for (auto [partition, slot] : selected) {
    if (partition->clear_produced(slot)) forgotten.push_back(partition->global_index(slot));
  }
  // Nothing became ready: no waiter to wake.
  std::sort(forgotten.begin(), forgotten.end());
  return forgotten;
}

void Controller::set_custom_meta(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                 std::span<const uint64_t> generations, std::span<const Value> custom_meta) {
  std::vector<core::EncodedMeta> updates = core::encode_updates(global_indexes, custom_meta);
  std::lock_guard lock(state_->mutex);
  auto [partition, slots] = state_->data.require_samples(partition_id, global_indexes, generations);
  auto metas = core::prepare_meta(*partition, slots, global_indexes, custom_meta, std::move(updates));
  // Stored first (what can fail), then traded in: every sample's or none.
  std::vector<std::pair<uint32_t, core::PartitionState::StoredMeta>> stored;
  stored.reserve(metas.size());
  for (auto& [slot, meta] : metas) stored.emplace_back(slot, partition->stored(std::move(meta)));
  for (auto& [slot, meta] : stored) partition->swap_meta(slot, meta);
  state_->change_logs.record(partition_id, *partition, ChangeKind::kTagged, slots, true);
  // A new group_id can complete a group.
  state_->notify_changed(&partition_id);
}

std::vector<int64_t> Controller::clear_samples(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                               std::span<const uint64_t> generations) {
  core::check_generations(global_indexes, generations);
  // Indexes already gone are skipped, but one no sample can have is bad
  // input: refused before anything is cleared.
  core::check_global_indexes(global_indexes, "clear_samples: global_indexes");
  std::lock_guard lock(state_->mutex);
  PartitionState* partition = state_->data.find(partition_id);
  if (partition == nullptr) return {};
  std::vector<uint32_t> slots;
  slots.reserve(global_indexes.size());
  for (size_t i = 0; i < global_indexes.size(); ++i) {
    const uint64_t generation = generations.empty() ? 0 : generations[i];
    if (auto slot = state_->data.named_slot(*partition, global_indexes[i], generation)) slots.push_back(*slot);
  }
  auto cleared = state_->change_logs.describe(partition_id, *partition, ChangeKind::kCleared, slots, false,
                                              core::ChangeLogs::Clock::now());
  std::vector<int64_t> released = state_->data.remove_samples(*partition, std::move(slots));
  state_->change_logs.append(partition_id, std::move(cleared));
  state_->leases.forget_samples(partition_id, released);
  state_->notify_changed(&partition_id);
  return released;
}

std::vector<uint64_t> Controller::last_generations(std::span<const int64_t> global_indexes) const {
  std::lock_guard lock(state_->mutex);
  const int64_t handed_out = state_->data.indexes().high_water();
  std::vector<uint64_t> generations;
  generations.reserve(global_indexes.size());
  for (const int64_t index : global_indexes) {
    if (index < 0 || index >= handed_out) {
      throw_invalid("global index " + std::to_string(index) + " was never handed out");
    }
    generations.push_back(state_->data.generation(index));
  }
  return generations;
}

std::vector<int64_t> Controller::reclaim_unproduced(const std::string& partition_id,
                                                    std::span<const int64_t> global_indexes,
                                                    std::span<const uint64_t> generations) {
  core::check_generations(global_indexes, generations);
  std::lock_guard lock(state_->mutex);
  PartitionState* partition = state_->data.find(partition_id);
  if (partition == nullptr) return {};
  std::vector<uint32_t> slots;
  for (size_t i = 0; i < global_indexes.size(); ++i) {
    const std::optional<uint32_t> slot = state_->data.slot_of(*partition, global_indexes[i]);
    if (!slot || (!generations.empty() && state_->data.generation(global_indexes[i]) != generations[i])) continue;
    const auto words = partition->produced_words(*slot);
    if (std::any_of(words.begin(), words.end(), [](uint64_t word) { return word != 0; })) continue;
    slots.push_back(*slot);
  }
  if (slots.empty()) return {};
  auto cleared = state_->change_logs.describe(partition_id, *partition, ChangeKind::kCleared, slots, false,
                                              core::ChangeLogs::Clock::now());
  std::vector<int64_t> released = state_->data.remove_samples(*partition, std::move(slots));
  state_->change_logs.append(partition_id, std::move(cleared));
  state_->leases.forget_samples(partition_id, released);
  state_->notify_changed(&partition_id);
  return released;
}

std::vector<int64_t> Controller::clear_partition(const std::string& partition_id) {
  std::lock_guard lock(state_->mutex);
  if (state_->data.find(partition_id) == nullptr) return {};
  std::vector<int64_t> released = state_->data.erase(partition_id);
  state_->sampler->clear(partition_id, nullptr);
  state_->replay_indexes.erase(partition_id);  // its index: a slot per sample
  try {
    state_->leases.forget(partition_id, nullptr);
  } catch (const std::bad_alloc&) {
    // Its entries stay: the samples are gone, and a later sample at one of
    // their indexes has another generation, which no lease of theirs matches.
  }
  state_->change_logs.record_partition_cleared(partition_id);
  state_->notify_changed(&partition_id);
  return released;
}

bool Controller::forget_partition_if_empty(const std::string& partition_id) {
  std::lock_guard lock(state_->mutex);
  const PartitionState* partition = state_->data.find(partition_id);
  // A partition a task has fetched from (or waits on) is in use, even empty.
  if (partition == nullptr || partition->size() != 0 || !partition->tasks().empty()) return false;
  state_->data.erase(partition_id);  // no samples: nothing is released
  state_->sampler->clear(partition_id, nullptr);
  state_->notify_changed(&partition_id);
  return true;
}

void Controller::reset_consumption(const std::string& partition_id, const std::string* task_name) {
  std::lock_guard lock(state_->mutex);
  PartitionState* partition = state_->data.find(partition_id);
  if (partition == nullptr) return;
  state_->leases.forget(partition_id, task_name);  // first: it may throw
  if (task_name != nullptr) {
    partition->erase_task(*task_name);  // rebuilt, all unconsumed, on next use
  } else {
    partition->erase_tasks();
  }
  state_->sampler->clear(partition_id, task_name);
  state_->notify_changed(&partition_id);
}

std::optional<std::vector<std::pair<int64_t, bool>>> Controller::consumption_status(
    const std::string& task_name, const std::string& partition_id) const {
  std::lock_guard lock(state_->mutex);
  const PartitionState* partition = state_->data.find(partition_id);
  if (partition == nullptr) return std::nullopt;
  const core::TaskQueue* queue = partition->find_task(task_name);
  std::vector<std::pair<int64_t, bool>> out;
  out.reserve(partition->size());
  for (uint32_t slot = partition->first(); slot != core::kNoSlot; slot = partition->next(slot)) {
    out.emplace_back(partition->global_index(slot), queue != nullptr && queue->is_consumed(slot));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<ProductionStatus> Controller::production_status(std::span<const std::string> fields,
                                                              const std::string& partition_id) const {
  std::lock_guard lock(state_->mutex);
  const PartitionState* partition = state_->data.find(partition_id);
  if (partition == nullptr) return std::nullopt;
  std::vector<std::optional<uint32_t>> ids;  // none: a field the partition never had
  ids.reserve(fields.size());
  for (const std::string& field : fields) ids.push_back(partition->field_id(field));
  std::vector<std::pair<int64_t, uint32_t>> samples;  // by global index
  samples.reserve(partition->size());
  for (uint32_t slot = partition->first(); slot != core::kNoSlot; slot = partition->next(slot)) {
    samples.emplace_back(partition->global_index(slot), slot);
  }
  std::sort(samples.begin(), samples.end());
  ProductionStatus out;
  out.field_count = fields.size();
  out.global_indexes.reserve(samples.size());
  out.produced.reserve(samples.size() * fields.size());
  for (const auto& [index, slot] : samples) {
    out.global_indexes.push_back(index);
    for (const auto& id : ids) out.produced.push_back(id && partition->produced(slot, *id) ? 1 : 0);
  }
  return out;
}

SampleProduction Controller::sample_production(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                               std::span<const uint64_t> generations,
                                               std::span<const std::string> fields) {
  core::check_generations(global_indexes, generations);
  std::lock_guard lock(state_->mutex);
  SampleProduction out;
  out.write_version = state_->data.new_write_version();
  out.field_count = fields.size();
  out.exists.resize(global_indexes.size());
  out.generations.resize(global_indexes.size());
  out.produced.resize(global_indexes.size() * fields.size());
  const PartitionState* found = state_->data.find(partition_id);
  if (found == nullptr) return out;
  const PartitionState& partition = *found;
  std::vector<std::optional<core::FieldMask>> masks;  // none: no sample has the field
  masks.reserve(fields.size());
  for (const std::string& field : fields) masks.push_back(partition.mask(std::span(&field, 1)));
  for (size_t i = 0; i < global_indexes.size(); ++i) {
    const auto slot = state_->data.named_slot(partition, global_indexes[i], generations.empty() ? 0 : generations[i]);
    if (!slot) continue;
    out.exists[i] = 1;
    out.generations[i] = state_->data.generation(global_indexes[i]);
    for (size_t f = 0; f < masks.size(); ++f) {
      out.produced[i * fields.size() + f] = masks[f] && partition.has_all(*slot, *masks[f]);
    }
  }
  return out;
}

bool Controller::all_consumed(const std::string& task_name, const std::string& partition_id) const {
  std::lock_guard lock(state_->mutex);
  const PartitionState* partition = state_->data.find(partition_id);
  if (partition == nullptr) return false;
  const core::TaskQueue* queue = partition->find_task(task_name);
  return partition->size() > 0 && queue != nullptr && queue->unconsumed() == 0;
}

bool Controller::all_produced(std::span<const std::string> fields, const std::string& partition_id) const {
  std::lock_guard lock(state_->mutex);
  const PartitionState* partition = state_->data.find(partition_id);
  if (partition == nullptr) return false;
  const auto mask = partition->mask(fields);
  if (!mask || partition->size() == 0) return false;
  for (uint32_t slot = partition->first(); slot != core::kNoSlot; slot = partition->next(slot)) {
    if (!partition->has_all(slot, *mask)) return false;
  }
  return true;
}

std::vector<std::string> Controller::partition_list() const {
  std::lock_guard lock(state_->mutex);
  std::vector<std::string> out;
  for (const PartitionState* partition : state_->data.in_creation_order()) out.push_back(partition->name());
  return out;
}

}  // namespace seqflow
