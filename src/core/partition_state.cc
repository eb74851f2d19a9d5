#include "core/partition_state.h"

#include <algorithm>
#include <new>
#include <random>

#include "common/amortized_reserve.h"

namespace seqflow::core {
namespace {

uint64_t random_epoch() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return engine();
}

}  // namespace

PartitionState::PartitionState(std::string name, uint32_t number)
    : name_(std::move(name)), number_(number), listing_version_{random_epoch(), 0} {}

void PartitionState::reserve_samples(size_t count) {
  const size_t slots = global_index_.size() + (count > free_slots_.size() ? count - free_slots_.size() : 0);
  amortized_reserve(global_index_, slots);
  amortized_reserve(produced_, slots * stride_);
  amortized_reserve(meta_, slots);
  amortized_reserve(key_, slots);
  amortized_reserve(keyed_change_, slots);
  amortized_reserve(length_, slots);
  amortized_reserve(group_, slots);
  amortized_reserve(put_id_, slots);
  amortized_reserve(put_pos_, slots);
  amortized_reserve(versions_, slots);
  live_.reserve_slots(slots);
  for (auto& [name, queue] : tasks_) queue.reserve_slots(slots);
}

uint32_t PartitionState::add_sample(int64_t global_index, uint32_t put_id, uint32_t put_pos, int64_t start_version) {
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    global_index_[slot] = global_index;
    std::fill_n(produced_.begin() + static_cast<ptrdiff_t>(slot * stride_), stride_, 0);
    meta_[slot].clear();
    meta_[slot].shrink_to_fit();
    length_[slot] = kNoLength;
    group_[slot] = 0;
    put_id_[slot] = put_id;
    put_pos_[slot] = put_pos;
    versions_[slot] = SampleVersions{start_version, SampleVersions::kUnfinished};
  } else {
    slot = static_cast<uint32_t>(global_index_.size());
    global_index_.push_back(global_index);
    produced_.resize(produced_.size() + stride_, 0);
    meta_.emplace_back();
    key_.emplace_back();
    keyed_change_.push_back(0);
    length_.push_back(kNoLength);
    group_.push_back(0);
    put_id_.push_back(put_id);
    put_pos_.push_back(put_pos);
    versions_.push_back(SampleVersions{start_version, SampleVersions::kUnfinished});
  }
  live_.push_back(slot);
  for (auto& [name, queue] : tasks_) queue.append(slot);
  return slot;
}

void PartitionState::remove_sample(uint32_t slot) {
  for (auto& [name, queue] : tasks_) queue.remove(slot);
  if (!key_[slot].empty()) {
    keyed_change_[slot] = ++listing_version_.changes;
    record_keyed(slot, KeyedChange::kUnkeyed);
    key_slot_.erase(key_[slot]);
    key_[slot].clear();
    key_[slot].shrink_to_fit();
  }
  live_.unlink(slot);
  for (std::vector<uint64_t>& versions : field_versions_) {
    if (slot < versions.size()) versions[slot] = 0;
  }
  if (slot < meta_version_.size()) meta_version_[slot] = 0;
  global_index_[slot] = -1;
  meta_[slot].clear();
  meta_[slot].shrink_to_fit();
  free_slots_.push_back(slot);
}

std::optional<uint32_t> PartitionState::field_id(const std::string& name) const {
  auto it = field_ids_.find(name);
  if (it == field_ids_.end()) return std::nullopt;
  return it->second;
}

uint32_t PartitionState::set_field(const std::string& name, const FieldSchema& schema) {
  if (auto id = field_id(name)) {
    schemas_[*id] = schema;
    return *id;
  }
  const auto id = static_cast<uint32_t>(field_names_.size());
  if (id >= stride_ * 64) {
    // Widen every sample's bitset by one word (rare: past 64 fields).
    const size_t wider = stride_ + 1;
    const size_t slots = global_index_.size();
    std::vector<uint64_t> bits(slots * wider, 0);
    for (size_t s = 0; s < slots; ++s) {
      std::copy_n(produced_.begin() + static_cast<ptrdiff_t>(s * stride_), stride_,
                  bits.begin() + static_cast<ptrdiff_t>(s * wider));
    }
    produced_ = std::move(bits);
    stride_ = wider;
  }
  field_names_.push_back(name);
  schemas_.push_back(schema);
  field_ids_.emplace(name, id);
  return id;
}

void PartitionState::restore_field_table(FieldTable&& table) noexcept {
  field_names_ = std::move(table.names);
  schemas_ = std::move(table.schemas);
  field_ids_ = std::move(table.ids);
}

bool PartitionState::produced(uint32_t slot, uint32_t field) const {
  return ((produced_[slot * stride_ + field / 64] >> (field % 64)) & 1U) != 0;
}

void PartitionState::set_produced(uint32_t slot, uint32_t field) {
  produced_[slot * stride_ + field / 64] |= uint64_t{1} << (field % 64);
}

bool PartitionState::clear_produced(uint32_t slot) {
  const auto first = produced_.begin() + static_cast<ptrdiff_t>(slot * stride_);
  const auto last = first + static_cast<ptrdiff_t>(stride_);
  const bool any = std::any_of(first, last, [](uint64_t word) { return word != 0; });
  std::fill(first, last, 0);
  return any;
}

namespace {

uint64_t version_at(const std::vector<uint64_t>& versions, uint32_t slot) {
  return slot < versions.size() ? versions[slot] : 0;
}

// Sized on the first version set (to every slot there is, so that later
// writes rarely grow it); a 0 into a vector never sized needs nothing.
void set_version_at(std::vector<uint64_t>& versions, uint32_t slot, uint64_t version, size_t slots) {
  if (slot >= versions.size()) {
    if (version == 0) return;
    versions.resize(std::max<size_t>(slots, slot + 1), 0);
  }
  versions[slot] = version;
}

}  // namespace

uint64_t PartitionState::field_version(uint32_t slot, uint32_t field) const {
  return field < field_versions_.size() ? version_at(field_versions_[field], slot) : 0;
}

void PartitionState::set_field_version(uint32_t slot, uint32_t field, uint64_t version) {
  if (field >= field_versions_.size()) {
    if (version == 0) return;
    field_versions_.resize(field + 1);
  }
  set_version_at(field_versions_[field], slot, version, global_index_.size());
}

bool PartitionState::size_field_versions(uint32_t field) {
  if (field >= field_versions_.size()) field_versions_.resize(field + 1);
  std::vector<uint64_t>& versions = field_versions_[field];
  const bool unsized = versions.empty();
  if (versions.size() < global_index_.size()) versions.resize(global_index_.size(), 0);
  return unsized;
}

bool PartitionState::size_meta_versions() {
  const bool unsized = meta_version_.empty();
  if (meta_version_.size() < global_index_.size()) meta_version_.resize(global_index_.size(), 0);
  return unsized;
}

uint64_t PartitionState::meta_version(uint32_t slot) const { return version_at(meta_version_, slot); }

void PartitionState::set_meta_version(uint32_t slot, uint64_t version) {
  set_version_at(meta_version_, slot, version, global_index_.size());
}

std::optional<FieldMask> PartitionState::mask(std::span<const std::string> fields) const {
  FieldMask out(stride_, 0);
  for (const std::string& name : fields) {
    auto id = field_id(name);
    if (!id) return std::nullopt;
    out[*id / 64] |= uint64_t{1} << (*id % 64);
  }
  return out;
}

bool PartitionState::has_all(uint32_t slot, const FieldMask& mask) const {
  const uint64_t* bits = produced_.data() + slot * stride_;
  for (size_t w = 0; w < mask.size(); ++w) {
    if ((bits[w] & mask[w]) != mask[w]) return false;
  }
  return true;
}

bool PartitionState::has_every_field(uint32_t slot) const noexcept {
  const uint64_t* bits = produced_.data() + slot * stride_;
  const size_t fields = field_names_.size();
  for (size_t w = 0; w < stride_; ++w) {
    const size_t in_word = std::min<size_t>(64, fields > w * 64 ? fields - w * 64 : 0);
    const uint64_t all = in_word == 64 ? ~uint64_t{0} : (uint64_t{1} << in_word) - 1;
    if ((bits[w] & all) != all) return false;
  }
  return true;
}

std::span<const uint64_t> PartitionState::produced_words(uint32_t slot) const {
  return {produced_.data() + slot * stride_, stride_};
}

void PartitionState::set_produced_words(uint32_t slot, std::span<const uint64_t> words) {
  std::copy_n(words.begin(), std::min(words.size(), stride_),
              produced_.begin() + static_cast<ptrdiff_t>(slot * stride_));
}

void PartitionState::set_meta(uint32_t slot, EncodedMeta meta) {
  StoredMeta replacement = stored(std::move(meta));
  swap_meta(slot, replacement);
}

PartitionState::StoredMeta PartitionState::stored(EncodedMeta meta) {
  StoredMeta out{std::move(meta.bytes), meta.length.value_or(kNoLength), 0};
  if (!meta.group) return out;
  auto known = group_ids_.find(*meta.group);
  if (known == group_ids_.end()) {
    group_names_.push_back(*meta.group);
    try {
      known = group_ids_.emplace(*meta.group, static_cast<uint32_t>(group_names_.size() - 1)).first;
    } catch (...) {
      group_names_.pop_back();
      throw;
    }
  }
  out.group = known->second + 1;
  return out;
}

void PartitionState::swap_meta(uint32_t slot, StoredMeta& meta) noexcept {
  if (!key_[slot].empty()) {
    keyed_change_[slot] = ++listing_version_.changes;
    record_keyed(slot, KeyedChange::kTagged);
  }
  std::swap(meta_[slot], meta.bytes);
  std::swap(length_[slot], meta.length);
  std::swap(group_[slot], meta.group);
}

std::optional<int64_t> PartitionState::length(uint32_t slot) const {
  if (length_[slot] == kNoLength) return std::nullopt;
  return length_[slot];
}

std::string PartitionState::group_key(uint32_t slot, int64_t n) const {
  if (group_[slot] != 0) return "g" + group_names_[group_[slot] - 1];
  const int64_t run = n > 0 ? put_pos_[slot] / n : put_pos_[slot];
  return "p" + std::to_string(put_id_[slot]) + ":" + std::to_string(run);
}

TaskQueue& PartitionState::task(const std::string& name) {
  auto it = tasks_.find(name);
  if (it != tasks_.end()) return it->second;
  // Built whole, then listed: out of memory on either, no task is left half made.
  TaskQueue queue;
  queue.reserve_slots(global_index_.size());
  for (uint32_t slot = live_.head(); slot != kNoSlot; slot = live_.next(slot)) {
    queue.append(slot);
  }
  return tasks_.emplace(name, std::move(queue)).first->second;
}

const TaskQueue* PartitionState::find_task(const std::string& name) const {
  auto it = tasks_.find(name);
  return it == tasks_.end() ? nullptr : &it->second;
}

std::optional<uint32_t> PartitionState::key_slot(const std::string& key) const {
  auto it = key_slot_.find(key);
  if (it == key_slot_.end()) return std::nullopt;
  return it->second;
}

const std::string* PartitionState::key_of(uint32_t slot) const { return key_[slot].empty() ? nullptr : &key_[slot]; }

void PartitionState::set_key(const std::string& key, uint32_t slot) {
  const bool fresh = key_[slot].empty();
  if (!fresh) key_slot_.erase(key_[slot]);
  keyed_change_[slot] = ++listing_version_.changes;
  record_keyed(slot, fresh ? KeyedChange::kKeyed : KeyedChange::kTagged);
  key_slot_[key] = slot;
  key_[slot] = key;
}

std::optional<std::vector<PartitionState::KeyedEvent>> PartitionState::take_keyed_changes() {
  const bool overflow = keyed_overflow_;
  keyed_overflow_ = false;
  std::vector<KeyedEvent> events;
  events.swap(keyed_events_);
  if (overflow) return std::nullopt;
  return events;
}

void PartitionState::record_keyed(uint32_t slot, KeyedChange change) noexcept {
  if (!recording_keyed_ || keyed_overflow_) return;
  // More changes than samples: walking them all again costs less than keeping them.
  constexpr size_t kAlwaysKept = 4096;
  if (keyed_events_.size() >= std::max(kAlwaysKept, live_.size())) {
    keyed_overflow_ = true;
  } else {
    try {
      keyed_events_.push_back({slot, change});
      return;
    } catch (const std::bad_alloc&) {
      keyed_overflow_ = true;
    }
  }
  std::vector<KeyedEvent>().swap(keyed_events_);
}

}  // namespace seqflow::core
