// Puts write storage first and publish through the control plane last, so
// data, production bits and custom metadata appear together; every failure
// undoes what the call had done.
#include "client/coordinating_client.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_set>

#include "client/call_deadline.h"
#include "durable/checkpoint_directory.h"
#include "common/stale_sample.h"
#include "core/custom_meta.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

using Schemas = std::map<std::string, FieldSchema>;

std::string in_quotes(const std::string& text) { return "\"" + text + "\""; }

size_t sample_count_of(const std::vector<Column>& columns) {
  if (columns.empty()) throw_invalid("put needs at least one field; the data holds none");
  const size_t count = columns.front().sample_count();
  for (const Column& column : columns) {
    if (column.sample_count() != count) {
      throw_invalid("field " + in_quotes(column.field) + " holds " + std::to_string(column.sample_count()) +
                    " samples but field " + in_quotes(columns.front().field) + " holds " + std::to_string(count) +
                    "; every field needs one value per sample");
    }
  }
  if (count == 0) throw_invalid("put of zero samples; the data must hold at least one sample");
  return count;
}

// Validates every column (schema_of does) before anything changes.
Schemas schemas_of(const std::vector<Column>& columns) {
  Schemas schemas;
  for (const Column& column : columns) {
    if (!schemas.emplace(column.field, schema_of(column)).second) {
      throw_invalid("field " + in_quotes(column.field) + " appears twice in one put");
    }
  }
  return schemas;
}

void check_custom_meta(std::span<const Value> custom_meta, size_t samples) {
  if (custom_meta.empty()) return;
  if (custom_meta.size() != samples) {
    throw_invalid("custom_meta holds " + std::to_string(custom_meta.size()) + " entries for " +
                  std::to_string(samples) + " samples; give one object per sample");
  }
  for (size_t i = 0; i < custom_meta.size(); ++i) {
    if (!custom_meta[i].is_object()) {
      throw_invalid("custom_meta[" + std::to_string(i) + "] must be an object, got " +
                    std::string(custom_meta[i].type_name()));
    }
  }
}

std::vector<std::string> field_names(const std::vector<Column>& columns) {
  std::vector<std::string> names;
  names.reserve(columns.size());
  for (const Column& column : columns) names.push_back(column.field);
  return names;
}

// `meta` after `fields` were produced with `custom_meta` merged key by key:
// what a put returns.
BatchMeta with_produced(BatchMeta meta, const Schemas& fields, std::span<const Value> custom_meta) {
  const size_t n = meta.size();
  const size_t old_width = meta.field_schema.size();
  const bool has_old_rows = meta.production_status.size() == n * old_width;
  std::map<std::string, size_t> old_column;
  for (const auto& entry : meta.field_schema) old_column.emplace(entry.first, old_column.size());
  for (const auto& [field, schema] : fields) meta.field_schema[field] = schema;
  std::vector<uint8_t> status;
  status.reserve(n * meta.field_schema.size());
  for (size_t i = 0; i < n; ++i) {
    for (const auto& entry : meta.field_schema) {
      bool produced = fields.count(entry.first) > 0;
      if (!produced && has_old_rows) {
        auto old = old_column.find(entry.first);
        produced = old != old_column.end() && meta.production_status[i * old_width + old->second];
      }
      status.push_back(produced ? 1 : 0);
    }
  }
  meta.production_status = std::move(status);
  if (meta.custom_meta.size() != n) meta.custom_meta = CustomMetaList(n);
  meta.custom_meta = meta.custom_meta.merged(custom_meta);
  return meta;
}

// A partition per sample, and a generation per sample or none.
void check_sample_columns(const BatchMeta& meta) {
  const size_t n = meta.size();
  if (meta.partition_ids.size() != n) {
    throw_invalid("the metadata holds " + std::to_string(meta.partition_ids.size()) + " partition ids for " +
                  std::to_string(n) + " samples");
  }
  if (!meta.generations.empty() && meta.generations.size() != n) {
    throw_invalid("the metadata holds " + std::to_string(meta.generations.size()) + " generations for " +
                  std::to_string(n) + " samples");
  }
}

// A get reads the versions the BatchMeta names; a put (target's) writes unversioned unless given one.
SampleKeys keys_of(const BatchMeta& meta) {
  return {meta.global_indexes, meta.partition_ids, meta.generations, 0,
          meta.versions.empty() ? nullptr : &meta.versions};
}

}  // namespace

// The deadline of one put and then of its rollback, as the scope every
// remote request of this thread honours; without a put timeout, none.
class CoordinatingClient::PutDeadline {
 public:
  using Clock = CallDeadline::Clock;

  explicit PutDeadline(std::chrono::milliseconds timeout) : timeout_(timeout) {
    if (timeout_.count() <= 0) return;
    deadline_ = Clock::now() + timeout_;
    scope_.emplace(deadline_);
  }

  // The rollback's deadline rules from now on: what the put left, or the
  // floor from now if that is later. Once per put (kv_put's rollback follows
  // write_existing's), so a put never gets more than one floor.
  void start_rollback() {
    if (!scope_ || rolling_back_) return;
    rolling_back_ = true;
    const auto floor = std::min(timeout_ / kRollbackFloorShare, kMaxRollbackFloor);
    deadline_ = std::max(deadline_, Clock::now() + floor);
    scope_.reset();  // restores the outer scope before the new one saves it
    scope_.emplace(deadline_);
  }

  // Takes `lock` by the deadline (without one: whenever it is free); false:
  // not taken.
  bool take(std::unique_lock<Mutex>& lock) const {
    if (!scope_) {
      lock.lock();
      return true;
    }
    return lock.try_lock_until(deadline_);
  }

 private:
  std::chrono::milliseconds timeout_;
  Clock::time_point deadline_{};
  bool rolling_back_ = false;
  std::optional<CallDeadline> scope_;
};

CoordinatingClient::CoordinatingClient(std::shared_ptr<ControlPlane> control, std::shared_ptr<DataPlane> data,
                                       ReleasedData released, std::chrono::milliseconds put_timeout,
                                       SaveParts save_parts)
    : control_(std::move(control)),
      data_(std::move(data)),
      released_(released),
      put_timeout_(put_timeout),
      save_parts_(std::move(save_parts)) {
  if (!save_parts_) {
    save_parts_ = [this](const std::string& controller_path, const std::string& storage_path) {
      control_->save(controller_path);
      data_->save(storage_path);
    };
  }
}

BatchMeta CoordinatingClient::put_new(const std::string& partition_id, const std::vector<Column>& columns,
                                      std::span<const Value> custom_meta) {
  if (partition_id.empty()) throw_invalid("partition_id is empty; name the partition to put into");
  const size_t n = sample_count_of(columns);
  const Schemas schemas = schemas_of(columns);
  check_custom_meta(custom_meta, n);

  std::shared_lock lock(mutex_);
  PutDeadline deadline(put_timeout_);
  bool partition_is_new = false;  // made by this insert: a failed put removes it again if empty
  BatchMeta meta = control_->insert(partition_id, static_cast<int64_t>(n), &partition_is_new);
  std::optional<Error> lost_reply;  // mark_produced sent, its answer lost: it may have committed
  try {
    const AroundWait around_wait = unlocked_while_waiting(lock, meta);
    SampleKeys keys = keys_of(meta);
    keys.around_wait = &around_wait;
    data_->put(keys, columns);
    try {
      control_->mark_produced(partition_id, meta.global_indexes, meta.generations, schemas, custom_meta);
    } catch (const Error& error) {
      if (error.code() == ErrorCode::kTimeout || error.code() == ErrorCode::kInternal) lost_reply = error;
      throw;
    }
  } catch (...) {
    deadline.start_rollback();
    // Never a clear: a commit whose reply was lost has made the samples
    // visible, and a consumer may have fetched them. Then the put is done
    // (a retry would put them twice), which the controller confirms.
    const std::optional<size_t> released = release_unproduced(partition_id, meta);
    if (lost_reply && released.value_or(0) == 0) {  // nothing released, or no answer: did the commit land?
      const std::optional<bool> committed =
          released ? produced_whole(partition_id, meta, schemas) : std::optional<bool>();
      if (committed == true) return with_produced(std::move(meta), schemas, custom_meta);
      if (!committed) {
        throw Error(lost_reply->code(), std::string(lost_reply->what()) +
                                            "; the put may have landed: its commit's reply was lost and the "
                                            "controller did not answer the rollback, so check before putting again");
      }
    }
    if (partition_is_new) forget_partition_if_empty(lock, partition_id, deadline);
    throw;
  }
  return with_produced(std::move(meta), schemas, custom_meta);
}

std::optional<bool> CoordinatingClient::produced_whole(const std::string& partition_id, const BatchMeta& samples,
                                                       const Schemas& schemas) {
  try {
    std::vector<std::string> names;
    for (const auto& [name, schema] : schemas) names.push_back(name);
    const SampleProduction production =
        control_->sample_production(partition_id, samples.global_indexes, samples.generations, names);
    for (size_t i = 0; i < samples.size(); ++i) {
      if (production.exists[i] == 0) return false;
      for (size_t j = 0; j < names.size(); ++j) {
        if (!production.has(i, j)) return false;
      }
    }
    return true;
  } catch (const Error& error) {
    if (error.code() == ErrorCode::kStaleSample) return false;  // gone, its index reused
    return std::nullopt;
  } catch (...) {
    return std::nullopt;
  }
}

BatchMeta CoordinatingClient::put_existing(const BatchMeta& meta, const std::vector<Column>& columns,
                                           std::span<const Value> custom_meta) {
  std::shared_lock lock(mutex_);
  const PutDeadline deadline(put_timeout_);  // the scope every request of the put honours
  return write_existing(meta, columns, custom_meta, lock);
}

CoordinatingClient::AroundWait CoordinatingClient::unlocked_while_waiting(std::shared_lock<Mutex>& lock,
                                                                          const BatchMeta& samples) {
  return [this, &lock, &samples](const std::function<void()>& wait) {
    const Interruptions before = interruptions_;
    lock.unlock();
    wait();
    lock.lock();
    check_still_owned(before, samples);
  };
}

// A waiting put holds no lock of this client: storing after a load would
// write into the restored state, and after a clear of its own samples into
// freed indexes that nothing would ever release.
void CoordinatingClient::check_still_owned(const Interruptions& before, const BatchMeta& samples) {
  if (interruptions_.checkpoints_loaded != before.checkpoints_loaded) {
    throw Error(ErrorCode::kStaleSample,
                "a checkpoint was loaded while the put waited for room, replacing the samples it was given; "
                "nothing was stored, put again");
  }
  if (interruptions_.clears == before.clears) return;
  // Clears are what make room: only a clear of one of the put's own samples ends it.
  std::map<std::string, std::vector<size_t>> positions;
  for (size_t i = 0; i < samples.size(); ++i) positions[samples.partition_ids[i]].push_back(i);
  try {
    for (const auto& [partition_id, at] : positions) {
      std::vector<int64_t> indexes;
      std::vector<uint64_t> generations;
      for (size_t i : at) {
        indexes.push_back(samples.global_indexes[i]);
        if (!samples.generations.empty()) generations.push_back(samples.generations[i]);
      }
      const SampleProduction production = control_->sample_production(partition_id, indexes, generations, {});
      for (size_t k = 0; k < indexes.size(); ++k) {
        if (!production.exists[k])
          throw_sample_gone(partition_id, indexes[k], generations.empty() ? 0 : generations[k]);
      }
    }
  } catch (const Error& error) {
    if (error.code() != ErrorCode::kStaleSample) throw;
    throw Error(ErrorCode::kStaleSample, std::string("a clear released the put's samples while it waited for room: ") +
                                             error.what() + "; nothing was stored");
  }
}

BatchMeta CoordinatingClient::write_existing(const BatchMeta& meta, const std::vector<Column>& columns,
                                             std::span<const Value> custom_meta, std::shared_lock<Mutex>& lock) {
  const size_t n = sample_count_of(columns);
  if (n != meta.size()) {
    throw_invalid("the data holds " + std::to_string(n) + " samples but the metadata " + std::to_string(meta.size()) +
                  "; give one value per sample of the metadata");
  }
  check_sample_columns(meta);
  if (!meta.custom_meta.empty() && meta.custom_meta.size() != n) {
    throw_invalid("the metadata holds " + std::to_string(meta.custom_meta.size()) + " custom_meta entries for " +
                  std::to_string(n) + " samples");
  }
  const Schemas schemas = schemas_of(columns);
  check_custom_meta(custom_meta, n);

  // Positions of each partition's samples, a check that they still exist
  // (of the BatchMeta's generations, when it has them), their current
  // generations, which the storage stores with the values, and this write's
  // version: the highest drawn (each is unique, so no other write has it).
  std::map<std::string, std::vector<size_t>> positions;
  for (size_t i = 0; i < n; ++i) positions[meta.partition_ids[i]].push_back(i);
  BatchMeta target = meta;
  target.generations.resize(n);
  const std::vector<std::string> names = field_names(columns);
  uint64_t write_version = 0;
  std::vector<uint64_t> write_tags;  // remote: what the units take to settle the version
  for (const auto& [partition_id, at] : positions) {
    std::vector<int64_t> indexes;
    std::vector<uint64_t> generations;
    indexes.reserve(at.size());
    for (size_t i : at) {
      indexes.push_back(meta.global_indexes[i]);
      if (!meta.generations.empty()) generations.push_back(meta.generations[i]);
    }
    const SampleProduction production = control_->sample_production(partition_id, indexes, generations, names);
    for (size_t k = 0; k < indexes.size(); ++k) {
      if (!production.exists[k]) {
        throw_sample_gone(partition_id, indexes[k], generations.empty() ? 0 : generations[k]);
      }
      target.generations[at[k]] = production.generations[k];
    }
    if (production.write_version > write_version) {
      write_version = production.write_version;
      write_tags = production.write_tags;
    }
  }

  // Staged beside the committed values: nobody reads them until the
  // controller commits this version, so a put that fails before that is
  // never seen (the units are told to drop a refused one, for its memory).
  SampleKeys keys = keys_of(target);
  keys.write_version = write_version;
  keys.read_versions = nullptr;
  const AroundWait around_wait = unlocked_while_waiting(lock, target);
  keys.around_wait = &around_wait;
  std::vector<int64_t> committed;  // positions of the partitions whose samples the controller committed
  // What readers see now, by position: the committed versions, and the tags
  // of samples where a newer write's won.
  FieldVersions versions;
  for (const std::string& name : names) versions[name].assign(n, write_version);
  std::map<size_t, Value> newer_metas;
  try {
    data_->put(keys, columns);
    for (const auto& [partition_id, at] : positions) {
      std::vector<int64_t> indexes;
      std::vector<uint64_t> generations;
      std::vector<Value> metas;
      for (size_t i : at) {
        indexes.push_back(target.global_indexes[i]);
        generations.push_back(target.generations[i]);
        if (!custom_meta.empty()) metas.push_back(custom_meta[i]);
      }
      CommittedWrite landed =
          control_->mark_produced(partition_id, indexes, generations, schemas, metas, write_version);
      committed.insert(committed.end(), at.begin(), at.end());
      for (const auto& [name, per_sample] : landed.versions) {
        const auto field = versions.find(name);
        if (field == versions.end() || per_sample.size() != at.size()) continue;
        for (size_t k = 0; k < at.size(); ++k) field->second[at[k]] = per_sample[k];
      }
      for (size_t k = 0; k < landed.newer_meta_positions.size(); ++k) {
        newer_metas.insert_or_assign(at[static_cast<size_t>(landed.newer_meta_positions[k])],
                                     std::move(landed.newer_metas[k]));
      }
    }
  } catch (const Error& error) {
    // A refusal (not a call that may have landed unseen: a timeout, a lost
    // reply) leaves the version uncommitted for good where it was refused:
    // the units drop it there, and commit it where the controller already
    // did (partitions commit one by one).
    if (error.code() != ErrorCode::kTimeout && error.code() != ErrorCode::kInternal) {
      std::vector<int64_t> refused;
      std::vector<uint8_t> is_committed(n, 0);
      for (int64_t i : committed) is_committed[static_cast<size_t>(i)] = 1;
      for (size_t i = 0; i < n; ++i) {
        if (!is_committed[i]) refused.push_back(static_cast<int64_t>(i));
      }
      settle_staged(target.select_samples(refused), names, write_version, write_tags, false);
      if (!committed.empty()) {
        settle_staged(target.select_samples(committed), names, write_version, write_tags, true);
      }
    }
    throw;
  }
  // Committed: every BatchMeta the controller gives out names this version
  // now, and the units serve it when named. Telling them lets them drop the
  // older versions and serve it unnamed too; a unit that misses this (slow,
  // or gone) keeps them until a later commit or the sample's clear, which
  // costs memory, never correctness, so the put has succeeded regardless.
  settle_staged(target, names, write_version, write_tags, true);
  BatchMeta out = with_produced(std::move(target), schemas, custom_meta);
  for (auto& [name, per_sample] : versions) out.versions[name] = std::move(per_sample);
  if (!newer_metas.empty()) {
    CustomMetaList tags;
    for (size_t i = 0; i < n; ++i) {
      const auto newer = newer_metas.find(i);
      if (newer != newer_metas.end()) {
        tags.push_back(newer->second);
      } else {
        tags.push_back_encoded(out.custom_meta.encoded(i));
      }
    }
    out.custom_meta = std::move(tags);
  }
  return out;
}

BatchMeta CoordinatingClient::get_meta(const MetaRequest& request) {
  // No client lock: a blocking fetch may wait for puts.
  return control_->get_meta(request);
}

std::vector<std::vector<SampleView>> CoordinatingClient::get_data(const BatchMeta& meta,
                                                                  std::span<const std::string> fields) {
  check_sample_columns(meta);
  // Views keep their buffers alive: a clear after this call does not
  // invalidate them, so no lock is needed.
  return data_->get(keys_of(meta), fields);
}

void CoordinatingClient::forget_partition_if_empty(std::shared_lock<Mutex>& lock, const std::string& partition_id,
                                                   const PutDeadline& deadline) {
  lock.unlock();
  // No put in flight: empty stays empty. Other puts may hold the lock until
  // their own deadlines; past this rollback's, the empty partition stays.
  std::unique_lock exclusive(mutex_, std::defer_lock);
  if (!deadline.take(exclusive)) return;
  try {
    control_->forget_partition_if_empty(partition_id);
  } catch (...) {
    // Best effort on a failure path: the caller reports the original error.
  }
}

void CoordinatingClient::settle_staged(const BatchMeta& samples, std::span<const std::string> fields,
                                       uint64_t write_version, std::span<const uint64_t> write_tags, bool commit) {
  if (samples.size() == 0) return;
  SampleKeys keys = keys_of(samples);
  keys.write_version = write_version;
  keys.read_versions = nullptr;
  keys.write_tags = write_tags;
  try {
    if (commit) {
      data_->commit(keys, fields);
    } else {
      data_->discard(keys, fields);
    }
  } catch (const Error&) {
    // Correct either way (only committed versions are named); a unit that
    // missed this drops the values with a later commit or the sample's clear.
  }
}

void CoordinatingClient::drop_released(const std::vector<int64_t>& released) {
  if (released_ == ReleasedData::kDroppedByClient && !released.empty()) data_->clear(released);
}

std::optional<size_t> CoordinatingClient::release_unproduced(const std::string& partition_id,
                                                             const BatchMeta& samples) {
  try {
    const std::vector<int64_t> released =
        control_->reclaim_unproduced(partition_id, samples.global_indexes, samples.generations);
    if (released_ == ReleasedData::kDroppedByClient && !released.empty()) {
      // Only what the controller released (another writer may have
      // produced a sample meanwhile), and only of these generations (a put
      // may have been handed a released index again by now).
      std::map<int64_t, uint64_t> generation_of;
      for (size_t i = 0; i < samples.size(); ++i)
        generation_of.emplace(samples.global_indexes[i], samples.generations[i]);
      std::vector<uint64_t> generations;
      for (int64_t index : released) generations.push_back(generation_of.at(index));
      data_->clear_generations(released, generations);
    }
    return released.size();
  } catch (...) {
    return std::nullopt;  // the original error is the one to report
  }
}

void CoordinatingClient::clear_samples(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                       std::span<const uint64_t> generations) {
  std::unique_lock lock(mutex_);
  ++interruptions_.clears;
  drop_released(control_->clear_samples(partition_id, global_indexes, generations));
}

void CoordinatingClient::clear_partition(const std::string& partition_id) {
  std::unique_lock lock(mutex_);
  ++interruptions_.clears;
  drop_released(control_->clear_partition(partition_id));
}

BatchMeta CoordinatingClient::kv_put(const std::string& partition_id, std::span<const std::string> keys,
                                     std::span<const Value> tags, const std::vector<Column>& columns) {
  if (partition_id.empty()) throw_invalid("partition_id is empty; name the partition of the keys");
  const size_t n = columns.empty() ? keys.size() : sample_count_of(columns);
  if (keys.size() != n) {
    throw_invalid(std::to_string(keys.size()) + " keys for " + std::to_string(n) +
                  " samples of data; give one key per sample");
  }
  if (!tags.empty() && tags.size() != n) {
    throw_invalid(std::to_string(tags.size()) + " tags for " + std::to_string(n) + " keys");
  }
  std::set<std::string> unique;
  for (const std::string& key : keys) {
    if (!unique.insert(key).second) throw_invalid("key " + in_quotes(key) + " appears twice in one put");
  }
  if (columns.empty()) {  // tags only: kv_resolve checks them
    std::shared_lock lock(mutex_);
    return control_->kv_resolve(partition_id, keys, tags);
  }
  schemas_of(columns);  // bad data and bad tags fail before any key is created
  core::check_tags(keys, tags);

  std::shared_lock lock(mutex_);
  PutDeadline deadline(put_timeout_);
  // Tags land with the data (mark_produced merges them as kv_resolve would,
  // under the data's write version): a write that fails leaves the known
  // keys' tags as they were, and of two writes of one key, the tags and the
  // data of the newer one are seen.
  std::vector<Value> tag_updates;
  tag_updates.reserve(tags.size());
  for (const Value& tag : tags) tag_updates.push_back(tag.is_null() ? Value::object() : tag);
  // The keys this call makes: a failed write releases only those (a key
  // another writer made meanwhile stays), and only while nothing is
  // produced in them (a write whose reply was lost may have landed, and a
  // retry overwrites it: keys are idempotent).
  std::vector<uint8_t> made_keys;
  bool partition_is_new = false;  // made by kv_resolve: a failed put removes it again if empty
  BatchMeta meta = control_->kv_resolve(partition_id, keys, {}, &partition_is_new, &made_keys);
  try {
    return write_existing(meta, columns, tag_updates, lock);
  } catch (...) {
    deadline.start_rollback();
    std::vector<int64_t> made;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (made_keys[i] != 0) made.push_back(static_cast<int64_t>(i));
    }
    if (!made.empty()) release_unproduced(partition_id, meta.select_samples(made));
    if (partition_is_new) forget_partition_if_empty(lock, partition_id, deadline);
    throw;
  }
}

BatchMeta CoordinatingClient::kv_meta(const std::string& partition_id, std::span<const std::string> keys) {
  return control_->kv_lookup(partition_id, keys);
}

void CoordinatingClient::kv_clear(const std::string& partition_id, std::span<const std::string> keys) {
  std::unique_lock lock(mutex_);
  ++interruptions_.clears;
  drop_released(control_->kv_clear(partition_id, keys));
}

ReplayPass CoordinatingClient::replay_pass(const ReplayRequest& request) {
  // A pass releases samples, so it runs as a clear runs (no put of this
  // client in flight), and never waits while it holds them off: the puts it
  // would wait for may be this client's. After an idle pass it sleeps
  // briefly instead, unlocked.
  ReplayRequest pass_now = request;
  pass_now.wait_ms = 0;
  ReplayPass pass;
  if (request.step == ReplayStep::kCount) {  // releases nothing: no clear lock
    pass = control_->replay_pass(pass_now);
  } else {
    std::unique_lock lock(mutex_);
    ++interruptions_.clears;
    pass = control_->replay_pass(pass_now);
    drop_released(pass.released);
  }
  // A pass that asked for DAPO values is not idle: the caller passes again with them at once.
  const bool idle =
      request.step != ReplayStep::kCount && pass.refill == 0 && !pass.ready && pass.unclassified_keys.empty();
  if (idle && request.wait_ms > 0) {
    std::this_thread::sleep_for(std::min(kReplayIdleWait, std::chrono::milliseconds(request.wait_ms)));
  }
  return pass;
}

bool CoordinatingClient::ack_replay_pass(const std::string& partition_id, uint64_t pass_id) {
  std::unique_lock lock(mutex_);  // releases as a clear does: a waiting put checks its samples again
  ++interruptions_.clears;
  const ReplayAck ack = control_->ack_replay_pass(partition_id, pass_id);
  drop_released(ack.released);
  return ack.acknowledged;
}

ReissuedPrompts CoordinatingClient::reissue_inflight_prompts(const std::string& partition_id, int64_t global_steps,
                                                             bool member_status) {
  std::unique_lock lock(mutex_);  // releases as a clear does
  ++interruptions_.clears;
  ReissuedPrompts reissued = control_->reissue_inflight_prompts(partition_id, global_steps, member_status);
  drop_released(reissued.released);
  return reissued;
}

void CoordinatingClient::save_checkpoint(const std::string& directory, const Value& user_metadata) {
  std::unique_lock lock(mutex_);
  durable::write_checkpoint_directory(directory, user_metadata, [this](const durable::CheckpointFiles& files) {
    save_parts_(files.controller, files.storage);
  });
}

Value CoordinatingClient::load_checkpoint(const std::string& directory) {
  namespace fs = std::filesystem;
  std::unique_lock lock(mutex_);
  const durable::CheckpointFiles files = durable::open_checkpoint_directory(directory);
  Value user_metadata = durable::read_checkpoint_metadata(files);  // a corrupt file fails before anything changes
  // The controller is loaded first and can be put back from this copy if the
  // storage file turns out to be bad; storage loads are all-or-nothing.
  const fs::path backup = durable::temporary_checkpoint_sibling(directory, "controller-backup");
  struct Remover {
    fs::path path;
    ~Remover() {
      std::error_code ignored;
      fs::remove(path, ignored);
    }
  } remover{backup};
  control_->save(backup.string());
  control_->load(files.controller);
  try {
    data_->load(files.storage);
  } catch (...) {
    control_->load(backup.string());
    throw;
  }
  ++interruptions_.checkpoints_loaded;
  return user_metadata;
}

std::optional<CapacityStats> CoordinatingClient::capacity_stats() const {
  const auto* unit = dynamic_cast<const StorageUnit*>(data_.get());
  if (unit == nullptr) return std::nullopt;  // remote: the units' metrics
  return unit->capacity_stats();
}

std::shared_ptr<Client> make_embedded_client(ControllerOptions controller_options, StorageOptions storage_options) {
  return std::make_shared<CoordinatingClient>(std::make_shared<Controller>(std::move(controller_options)),
                                              std::make_shared<StorageUnit>(storage_options),
                                              ReleasedData::kDroppedByClient);
}

}  // namespace seqflow
