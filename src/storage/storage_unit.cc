// The column store: (global index, field) -> views of puts' buffers, one
// per version held (versioned_value.h).
#include "seqflow/storage.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "common/constant_time.h"
#include "common/random_id.h"
#include "common/stale_sample.h"
#include "seqflow/error.h"
#include "storage/checkpoint.h"
#include "storage/fair_shared_mutex.h"
#include "storage/storage_capacity.h"
#include "storage/versioned_value.h"

namespace seqflow {
namespace {

using Fields = std::map<std::string, VersionedValue>;

uint64_t bytes_of(const Fields& fields) {
  uint64_t bytes = 0;
  for (const auto& [field, value] : fields) bytes += value.bytes();
  return bytes;
}

// Values held, counting each version.
uint64_t values_of(const Fields& fields) {
  uint64_t values = 0;
  for (const auto& [field, value] : fields) values += value.versions().size();
  return values;
}

// Throws when `requested` more units do not fit under `limit` (0: unlimited).
void check_room(std::string_view limit_name, uint64_t limit, uint64_t used, uint64_t requested, std::string_view unit,
                std::string_view requester) {
  if (limit == 0) return;
  const uint64_t free = used < limit ? limit - used : 0;
  if (requested <= free) return;
  throw_invalid("storage full: " + std::string(limit_name) + " is " + std::to_string(limit) + "; " +
                std::string(requester) + " needs " + std::to_string(requested) + " " + std::string(unit) + ", " +
                std::to_string(free) + " are free");
}

void check_keys(const SampleKeys& samples, bool is_put) {
  const size_t n = samples.global_indexes.size();
  if (samples.partitions.size() != n) {
    throw_invalid("partitions holds " + std::to_string(samples.partitions.size()) + " entries for " +
                  std::to_string(n) + " global indexes; give one per index");
  }
  if (samples.generations.size() == n) return;
  if (samples.generations.empty() && !is_put) return;
  throw_invalid("generations holds " + std::to_string(samples.generations.size()) + " entries for " +
                std::to_string(n) + " global indexes; give one per index" + (is_put ? "" : ", or none"));
}

void check_indexes(std::span<const int64_t> global_indexes) {
  std::unordered_map<int64_t, size_t> position;
  position.reserve(global_indexes.size());
  for (size_t i = 0; i < global_indexes.size(); ++i) {
    const int64_t gi = global_indexes[i];
    if (gi < 0) {
      throw_invalid("global_indexes[" + std::to_string(i) + "] is negative: " + std::to_string(gi));
    }
    auto [it, inserted] = position.emplace(gi, i);
    if (!inserted) {
      throw_invalid("global index " + std::to_string(gi) + " appears twice in one put (positions " +
                    std::to_string(it->second) + " and " + std::to_string(i) + ")");
    }
  }
}

void check_columns(size_t samples, const std::vector<Column>& columns) {
  std::unordered_set<std::string_view> fields;
  for (const Column& column : columns) {
    column.validate();
    if (column.sample_count() != samples) {
      throw_invalid("column \"" + column.field + "\" holds " + std::to_string(column.sample_count()) +
                    " samples; the put has " + std::to_string(samples) + " global indexes");
    }
    if (!fields.insert(column.field).second) {
      throw_invalid("column \"" + column.field + "\" appears twice in one put");
    }
  }
}

// One segment holds all `samples`; several hold them in turn, each naming
// the fields of the first in its order.
void check_segments(size_t samples, std::span<const std::vector<Column>> segments) {
  if (segments.empty()) throw_invalid("a put in segments needs at least one segment");
  if (segments.size() == 1) return check_columns(samples, segments.front());
  size_t covered = 0;
  for (size_t k = 0; k < segments.size(); ++k) {
    const std::vector<Column>& columns = segments[k];
    if (columns.size() != segments.front().size() || columns.empty()) {
      throw_invalid("put segment " + std::to_string(k) + " holds " + std::to_string(columns.size()) +
                    " columns; segment 0 holds " + std::to_string(segments.front().size()) +
                    " (every segment names the same fields, at least one)");
    }
    check_columns(columns.front().sample_count(), columns);
    for (size_t c = 0; c < columns.size(); ++c) {
      if (columns[c].field != segments.front()[c].field) {
        throw_invalid("put segment " + std::to_string(k) + " column " + std::to_string(c) + " is field \"" +
                      columns[c].field + "\"; segment 0's is \"" + segments.front()[c].field + "\"");
      }
    }
    covered += columns.front().sample_count();
  }
  if (covered != samples) {
    throw_invalid("the put's " + std::to_string(segments.size()) + " segments hold " + std::to_string(covered) +
                  " samples; the put has " + std::to_string(samples) + " global indexes");
  }
}

}  // namespace

namespace {

// The values of one global index and the sample they belong to.
struct StoredSample {
  uint64_t generation = 0;  // 0: not known (a version 1 checkpoint): any sample may claim them
  std::string partition;    // empty likewise
  Fields fields;
};

uint64_t overhead_of(const StoredSample& sample) {
  return kSampleOverheadBytes + kValueOverheadBytes * values_of(sample.fields);
}
using Values = std::unordered_map<int64_t, StoredSample>;

// A put of a newer generation: the stored values are a cleared sample's.
bool supersedes(const StoredSample& incoming, const StoredSample& stored) {
  return stored.generation != 0 && incoming.generation > stored.generation;
}

// A get's or commit's sample against the one stored under its index.
bool is_owner(const StoredSample& stored, const std::string& partition, uint64_t generation) {
  return (generation == 0 || stored.generation == 0 || generation == stored.generation) &&
         (stored.partition.empty() || stored.partition == partition);
}

void check_owner(const StoredSample& stored, int64_t gi, const std::string& partition, uint64_t generation) {
  if (generation != 0 && stored.generation != 0 && generation != stored.generation) {
    throw_sample_reused(partition, gi, generation, stored.generation);
  }
  if (!stored.partition.empty() && stored.partition != partition) {
    throw_sample_foreign(partition, gi, generation, stored.partition);
  }
}

// Per requested field, the version each sample reads (null: the committed one).
std::vector<const std::vector<uint64_t>*> read_versions_of(const SampleKeys& samples,
                                                           std::span<const std::string> fields) {
  std::vector<const std::vector<uint64_t>*> out(fields.size(), nullptr);
  if (samples.read_versions == nullptr) return out;
  const size_t n = samples.global_indexes.size();
  for (const auto& [field, versions] : *samples.read_versions) {
    if (versions.size() != n) {
      throw_invalid("read_versions of field \"" + field + "\" holds " + std::to_string(versions.size()) +
                    " versions for " + std::to_string(n) + " global indexes; give one per index");
    }
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    auto named = samples.read_versions->find(fields[f]);
    if (named != samples.read_versions->end()) out[f] = &named->second;
  }
  return out;
}

// Version 0 (the committed value) gets the words it got before versions.
[[noreturn]] void throw_no_value(const std::string& field, uint64_t version, const VersionedValue* held, int64_t gi,
                                 const std::string& partition) {
  if (version == 0) {
    throw Error(ErrorCode::kNotFound, "storage holds no field \"" + field + "\" for global index " +
                                          std::to_string(gi) + " of partition '" + partition + "'");
  }
  const std::string committed =
      held != nullptr && held->committed() ? "version " + std::to_string(*held->committed()) : std::string("none");
  throw Error(ErrorCode::kNotFound, "storage holds no version " + std::to_string(version) + " of field \"" + field +
                                        "\" for global index " + std::to_string(gi) + " of partition '" + partition +
                                        "' (committed: " + committed + ")");
}

using Clock = std::chrono::steady_clock;
// A service's put and its retries: the same samples (their first one and
// their number) of the same write. It finds the waiting put; its ticket,
// which a peer cannot guess as it can the samples, proves the caller's.
using RetryKey = StorageUnit::RetriedPut;
using Ticket = StorageUnit::Ticket;

bool same_ticket(const Ticket& given, const Ticket& held) {
  const auto text = [](const Ticket& ticket) {
    return std::string_view(reinterpret_cast<const char*>(ticket.data()), ticket.size());
  };
  return equal_in_constant_time(text(given), text(held));
}

// One answer whether no put waits under those samples or another holds
// them: a guesser learns nothing of which.
constexpr std::string_view kNoSuchTicket =
    "no waiting put of these samples holds this ticket (its place lapsed, or the ticket is not its)";

}  // namespace

struct StorageUnit::State {
  explicit State(const StorageOptions& given) : options(given), capacity(given) {}

  StorageOptions options;
  mutable storage::FairSharedMutex mutex;
  Values values;
  StorageStats stats;
  storage::StorageCapacity capacity;
  std::condition_variable_any room_made;  // waiting puts (WhenFull::kWait): notified when values are dropped
  CapacityStats capacity_stats;           // but waiting_puts: waiters.size()
  // Puts waiting for room, by arrival (their places), each with what it
  // asked for at its last check. A put counts the room of those ahead of it
  // as taken, so that later puts (small ones too) never take the room an
  // earlier one waits for: waiters are served in order where they compete.
  struct Waiter {
    storage::Reserved asked;
    storage::UsageChange total;  // its change at its last check (asked: what it adds)
    storage::PartitionChanges partitions;
    // A service's put, which its client retries (try_put): its retries'
    // key and ticket, and when its place lapses if no retry came.
    std::optional<RetryKey> retried_as;
    Ticket ticket{};
    Clock::time_point lapses{};
    Clock::time_point ends{};  // lapses no later than this (StorageUnit::kMostRetriedPutPlace)
  };
  std::map<uint64_t, Waiter> waiters;
  // Places of the waiters a service's client retries, by their key: puts
  // of the same samples (a peer can guess them) each hold a place and
  // ticket of their own, so one that came first cannot deny another one.
  std::multimap<RetryKey, uint64_t> retrying;
  uint64_t next_place = 0;

  // The place of the retried put named `key` whose client holds `ticket`.
  std::optional<uint64_t> place_of(const RetryKey& key, const Ticket& ticket) const {
    const auto [first, last] = retrying.equal_range(key);
    for (auto retried = first; retried != last; ++retried) {
      if (same_ticket(ticket, waiters.at(retried->second).ticket)) return retried->second;
    }
    return std::nullopt;
  }

  void forget_retried(const RetryKey& key, uint64_t place) {
    const auto [first, last] = retrying.equal_range(key);
    for (auto retried = first; retried != last; ++retried) {
      if (retried->second != place) continue;
      retrying.erase(retried);
      return;
    }
  }

  // The room taken by the waiters ahead of `place` (none: of every waiter).
  storage::Reserved reserved_ahead_of(std::optional<uint64_t> place) const {
    storage::Reserved ahead;
    for (auto waiter = waiters.begin(); waiter != waiters.end() && (!place || waiter->first < *place); ++waiter) {
      const storage::Reserved& asked = waiter->second.asked;
      ahead.unit.samples += asked.unit.samples;
      ahead.unit.bytes += asked.unit.bytes;
      for (const auto& [partition, usage] : asked.partitions) {
        storage::Usage& sum = ahead.partitions[partition];
        sum.samples += usage.samples;
        sum.bytes += usage.bytes;
      }
    }
    return ahead;
  }

  // Drops the places of retried puts whose client stopped asking (gone,
  // or past its budget). Whether any went: room for the others.
  bool drop_lapsed(Clock::time_point now) {
    bool dropped = false;
    for (auto waiter = waiters.begin(); waiter != waiters.end();) {
      if (!waiter->second.retried_as || waiter->second.lapses > now) {
        ++waiter;
        continue;
      }
      forget_retried(*waiter->second.retried_as, waiter->first);
      waiter = waiters.erase(waiter);
      dropped = true;
    }
    return dropped;
  }

  // A service's put answered "full" keeps (or takes) its place in line
  // until its client's next try, which a client that waits sends within
  // kRetriedPutPlace; at most max_waiting_puts hold one. Its ticket (none:
  // no place for it).
  std::optional<Ticket> keep_place_of_retried_put(std::optional<uint64_t>& place, const RetryKey& key,
                                                  const storage::UsageChange& total,
                                                  const storage::PartitionChanges& partitions, Clock::time_point now) {
    const bool new_place = !place;
    if (new_place) {
      if (retrying.size() >= options.max_waiting_puts) return std::nullopt;
      place = next_place++;
      retrying.emplace(key, *place);
      ++capacity_stats.puts_waited;  // a put takes its place in line
    }
    Waiter& waiter = waiters[*place];
    if (new_place) {
      waiter.ends = now + StorageUnit::kMostRetriedPutPlace;
      waiter.ticket = random_bytes<sizeof(Ticket)>();
    }
    waiter.asked = {};
    waiter.asked.add(total, partitions);
    waiter.total = total;
    waiter.partitions = partitions;
    waiter.retried_as = key;
    waiter.lapses = std::min(now + StorageUnit::kRetriedPutPlace, waiter.ends);
    return waiter.ticket;
  }

  void leave(uint64_t place) {
    const auto waiter = waiters.find(place);
    if (waiter == waiters.end()) return;
    if (waiter->second.retried_as) forget_retried(*waiter->second.retried_as, place);
    waiters.erase(waiter);
  }
};

namespace {

// What a put changes, checked against the limits before it changes anything.
struct PutChange {
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t overhead_in = 0;
  uint64_t overhead_out = 0;
  storage::UsageChange total;            // samples and bytes (values and bookkeeping)
  storage::PartitionChanges partitions;  // counted only with a per-partition limit
};

// Under the unit's lock, of its `values`; throws kStaleSample as a put of `staged` would.
PutChange change_of_put(const Values& values, const Values& staged, bool per_partition) {
  PutChange change;
  const auto count = [&](const std::string& partition, storage::Usage in, storage::Usage out) {
    if (!per_partition) return;
    storage::UsageChange& scope = change.partitions[partition];
    scope.in.samples += in.samples;
    scope.in.bytes += in.bytes;
    scope.out.samples += out.samples;
    scope.out.bytes += out.bytes;
  };
  const auto whole = [](const StoredSample& sample) {
    return storage::Usage{1, bytes_of(sample.fields) + overhead_of(sample)};
  };
  for (const auto& [gi, sample] : staged) {
    auto stored = values.find(gi);
    if (stored == values.end()) {
      ++change.total.in.samples;
      change.bytes_in += bytes_of(sample.fields);
      change.overhead_in += overhead_of(sample);
      count(sample.partition, whole(sample), {});
      continue;
    }
    const StoredSample& old = stored->second;
    if (old.generation != 0 && sample.generation < old.generation) {
      throw_sample_reused(sample.partition, gi, sample.generation, old.generation);
    }
    if (supersedes(sample, old)) {  // dropped whole
      change.bytes_out += bytes_of(old.fields);
      change.overhead_out += overhead_of(old);
      change.bytes_in += bytes_of(sample.fields);
      change.overhead_in += overhead_of(sample);
      count(old.partition, {}, whole(old));
      count(sample.partition, whole(sample), {});
      continue;
    }
    if (!old.partition.empty() && old.partition != sample.partition) {
      throw_sample_foreign(sample.partition, gi, sample.generation, old.partition);
    }
    if (old.partition.empty()) {  // a sample of a checkpoint that kept no partitions: claimed by this one's
      count(old.partition, {}, whole(old));
      count(sample.partition, whole(old), {});
    }
    storage::UsageChange fields;
    for (const auto& [field, value] : sample.fields) {
      auto slot = old.fields.find(field);
      if (slot == old.fields.end()) {
        fields.in.bytes += value.bytes() + kValueOverheadBytes;
        change.bytes_in += value.bytes();
        change.overhead_in += kValueOverheadBytes;
        continue;
      }
      const VersionedValue::Change written = slot->second.change_of_write(value);
      // A value that takes another's place reuses its bookkeeping: an
      // overwrite asks only for its bytes.
      const uint64_t reused = std::min(written.values_in, written.values_out);
      const uint64_t overhead_in = kValueOverheadBytes * (written.values_in - reused);
      const uint64_t overhead_out = kValueOverheadBytes * (written.values_out - reused);
      change.bytes_in += written.bytes_in;
      change.bytes_out += written.bytes_out;
      change.overhead_in += overhead_in;
      change.overhead_out += overhead_out;
      fields.in.bytes += written.bytes_in + overhead_in;
      fields.out.bytes += written.bytes_out + overhead_out;
    }
    count(sample.partition, fields.in, fields.out);
  }
  // Values this put drops are released by it, so they count as free.
  change.total.in.bytes = change.bytes_in + change.overhead_in;
  change.total.out.bytes = change.bytes_out + change.overhead_out;
  return change;
}

}  // namespace

StorageUnit::StorageUnit(StorageOptions options) : state_(std::make_unique<State>(options)) {}

const StorageOptions& StorageUnit::options() const { return state_->options; }

CapacityStats StorageUnit::capacity_stats() const {
  std::shared_lock lock(state_->mutex);
  CapacityStats out = state_->capacity_stats;
  out.waiting_puts = state_->waiters.size();
  return out;
}

std::vector<StorageUnit::PartitionUsage> StorageUnit::partition_usage() const {
  std::shared_lock lock(state_->mutex);
  return state_->capacity.partition_usage();
}

StorageUnit::~StorageUnit() = default;

void StorageUnit::put(const SampleKeys& samples, const std::vector<Column>& columns) {
  store(samples, std::span(&columns, 1), true, std::nullopt);
}

std::optional<StorageUnit::Full> StorageUnit::try_put(const SampleKeys& samples, const std::vector<Column>& columns,
                                                      const std::optional<Ticket>& ticket) {
  return store(samples, std::span(&columns, 1), false, ticket);
}

std::optional<StorageUnit::Full> StorageUnit::try_put_segments(const SampleKeys& samples,
                                                               std::span<const std::vector<Column>> segments,
                                                               const std::optional<Ticket>& ticket) {
  return store(samples, segments, false, ticket);
}

std::optional<StorageUnit::Full> StorageUnit::store(const SampleKeys& samples,
                                                    std::span<const std::vector<Column>> segments, bool wait,
                                                    const std::optional<Ticket>& retry_ticket) {
  const std::span<const int64_t> global_indexes = samples.global_indexes;
  check_keys(samples, true);
  check_indexes(global_indexes);
  check_segments(global_indexes.size(), segments);
  if (segments.front().empty() || global_indexes.empty()) return std::nullopt;

  // Every allocation happens here, before the lock: under it, values only
  // move between node-based maps, which cannot throw, so a put lands whole.
  Values staged;
  staged.reserve(global_indexes.size());
  size_t i = 0;
  for (const std::vector<Column>& columns : segments) {
    for (size_t j = 0; j < columns.front().sample_count(); ++j, ++i) {
      StoredSample& sample = staged[global_indexes[i]];
      sample.generation = samples.generations[i];
      sample.partition = samples.partitions[i];
      for (const Column& column : columns) {
        sample.fields.emplace(column.field, VersionedValue(samples.write_version, column.sample(j)));
      }
    }
  }

  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + state_->options.wait_timeout;
  const RetryKey retry_key{global_indexes[0], samples.generations[0], samples.write_version, global_indexes.size()};
  std::unique_lock lock(state_->mutex);
  if (state_->drop_lapsed(started)) state_->room_made.notify_all();
  // While the put waits: its place among the waiters. A service's put that
  // was answered "full" before has its place still (its client retries it
  // with the ticket it was given).
  std::optional<uint64_t> place;
  if (!wait && retry_ticket) place = state_->place_of(retry_key, *retry_ticket);
  PutChange change;
  try {
    for (;;) {
      change = change_of_put(state_->values, staged, state_->capacity.counts_partitions());
      const std::optional<storage::Refusal> refusal =
          state_->capacity.refusal({state_->values.size(), state_->stats.bytes + state_->stats.overhead_bytes},
                                   change.total, change.partitions, state_->reserved_ahead_of(place), "the put");
      if (!refusal) break;
      const bool waits = state_->options.when_full == WhenFull::kWait && !refusal->never_fits;
      if (waits) ++state_->capacity_stats.full_answers;
      if (waits && !wait) {  // a service's put: its client waits and retries
        return Full{refusal->message,
                    state_->keep_place_of_retried_put(place, retry_key, change.total, change.partitions, started)};
      }
      if (!waits || std::chrono::steady_clock::now() >= deadline) {
        ++state_->capacity_stats.puts_refused;
        if (!wait || !place) throw_invalid(refusal->message);  // it did not wait here
        const auto waited_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
        throw_invalid(refusal->message + "; the put waited " + std::to_string(waited_ms.count()) +
                      " ms for room (wait_timeout " + std::to_string(state_->options.wait_timeout.count()) + " ms)");
      }
      if (!place) {
        ++state_->capacity_stats.puts_waited;
        place = state_->next_place++;
      }
      state_->waiters[*place].asked = {};
      state_->waiters[*place].asked.add(change.total, change.partitions);
      // Unlocked meanwhile; clears, commits, discards and waiters that leave
      // notify. The caller's locks (around_wait) are taken again only after
      // this unit's is released.
      const std::function<void()> wait_for_room = [&] {
        state_->room_made.wait_until(lock, deadline);
        lock.unlock();
      };
      if (samples.around_wait != nullptr) {
        (*samples.around_wait)(wait_for_room);
      } else {
        wait_for_room();
      }
      lock.lock();
    }
    // The last steps that may throw, before anything changes: the values'
    // buckets, then (it changes nothing when it throws) a new partition's count.
    state_->values.reserve(state_->values.size() + change.total.in.samples);
    state_->capacity.add(change.partitions);
  } catch (...) {
    if (place) {
      if (!lock.owns_lock()) lock.lock();
      state_->leave(*place);
      lock.unlock();
      state_->room_made.notify_all();  // the room it held is free for the waiters behind it
    }
    throw;
  }
  if (place) state_->leave(*place);  // stored: the room it held is its own now

  for (auto it = staged.begin(); it != staged.end();) {
    auto stored = state_->values.find(it->first);
    if (stored == state_->values.end()) {
      state_->values.insert(staged.extract(it++));
      continue;
    }
    StoredSample& old = stored->second;
    if (supersedes(it->second, old)) {
      std::swap(old, it->second);  // the old sample leaves with `staged`
      ++it;
      continue;
    }
    old.generation = it->second.generation;  // claims values of generation 0
    std::swap(old.partition, it->second.partition);
    Fields& fields = it->second.fields;
    for (auto field = fields.begin(); field != fields.end();) {
      auto slot = old.fields.find(field->first);
      if (slot == old.fields.end()) {
        old.fields.insert(fields.extract(field++));
      } else {
        slot->second.write(field->second);  // what it drops, or an ignored write, leaves with `staged`
        ++field;
      }
    }
    ++it;
  }
  state_->stats.bytes = state_->stats.bytes - change.bytes_out + change.bytes_in;
  state_->stats.overhead_bytes = state_->stats.overhead_bytes - change.overhead_out + change.overhead_in;
  state_->stats.samples = state_->values.size();
  lock.unlock();
  // `staged` now holds the dropped views; their buffers may be freed here, unlocked.
  return std::nullopt;
}

StorageUnit::Room StorageUnit::room_for(const RetriedPut& put, const Ticket& ticket) {
  const auto now = Clock::now();
  std::unique_lock lock(state_->mutex);
  const bool lapsed = state_->drop_lapsed(now);
  const std::optional<uint64_t> place = state_->place_of(put, ticket);
  Room room;
  if (!place) room.not_placed = kNoSuchTicket;
  if (place) {
    State::Waiter& waiter = state_->waiters.at(*place);
    std::optional<storage::Refusal> refusal =
        state_->capacity.refusal({state_->values.size(), state_->stats.bytes + state_->stats.overhead_bytes},
                                 waiter.total, waiter.partitions, state_->reserved_ahead_of(place), "the put");
    waiter.lapses = std::min(now + kRetriedPutPlace, waiter.ends);  // its client is still there
    room.placed = true;
    if (refusal && !refusal->never_fits) {  // one that never fits: the put itself raises
      ++state_->capacity_stats.full_answers;
      room.full = std::move(refusal->message);
    }
  }
  lock.unlock();
  if (lapsed) state_->room_made.notify_all();
  return room;
}

StorageUnit::Room StorageUnit::leave_line(const RetriedPut& put, const Ticket& ticket) {
  std::unique_lock lock(state_->mutex);
  const std::optional<uint64_t> place = state_->place_of(put, ticket);
  if (!place) return {false, std::nullopt, std::string(kNoSuchTicket)};
  state_->leave(*place);
  lock.unlock();
  state_->room_made.notify_all();
  return {true, std::nullopt, std::nullopt};
}

std::vector<std::vector<SampleView>> StorageUnit::get(const SampleKeys& samples,
                                                      std::span<const std::string> fields) const {
  check_keys(samples, false);
  const std::vector<const std::vector<uint64_t>*> read_versions = read_versions_of(samples, fields);
  const std::span<const int64_t> global_indexes = samples.global_indexes;
  std::vector<std::vector<SampleView>> out(global_indexes.size());
  std::shared_lock lock(state_->mutex);
  for (size_t i = 0; i < global_indexes.size(); ++i) {
    const int64_t gi = global_indexes[i];
    const std::string& partition = samples.partitions[i];
    const uint64_t generation = samples.generations.empty() ? 0 : samples.generations[i];
    auto stored = state_->values.find(gi);
    if (stored == state_->values.end()) {
      if (fields.empty()) continue;
      throw_sample_without_data(partition, gi, generation, fields.front());
    }
    const StoredSample& sample = stored->second;
    check_owner(sample, gi, partition, generation);
    out[i].reserve(fields.size());
    for (size_t f = 0; f < fields.size(); ++f) {
      const uint64_t version = read_versions[f] == nullptr ? 0 : (*read_versions[f])[i];
      auto slot = sample.fields.find(fields[f]);
      const VersionedValue* held = slot == sample.fields.end() ? nullptr : &slot->second;
      const SampleView* view = held == nullptr ? nullptr : held->read(version);
      if (view == nullptr) throw_no_value(fields[f], version, held, gi, partition);
      out[i].push_back(*view);
    }
  }
  return out;
}

// A commit or a discard of samples.write_version. Room for the values it
// drops is made before the lock (again, unlocked, if a put added more
// meanwhile), so that under it values only move between maps.
void StorageUnit::settle_version(const SampleKeys& samples, std::span<const std::string> fields, Settle settle) {
  const bool commit = settle == Settle::kCommit;
  const char* op = commit ? "commit" : "discard";
  const auto drops_of = [commit](const VersionedValue& value, uint64_t v) {
    return commit ? value.drops_of_commit(v) : value.drops_of_discard(v);
  };
  const auto apply = [commit](VersionedValue& value, uint64_t v,
                              std::vector<VersionedValue::Versions::node_type>& out) {
    commit ? value.commit(v, out) : value.discard(v, out);
  };
  check_keys(samples, false);
  const uint64_t version = samples.write_version;
  if (version == 0) {
    throw_invalid(std::string(op) + " needs write_version above 0 (an unversioned put commits itself); got 0");
  }
  const std::span<const int64_t> global_indexes = samples.global_indexes;
  // The stored sample at position i, or end(): nothing stored, or another
  // sample's values (the index was cleared and reused meanwhile), where
  // nothing of this write is to settle.
  const auto owned = [&](size_t i) {
    const auto stored = state_->values.find(global_indexes[i]);
    const uint64_t generation = samples.generations.empty() ? 0 : samples.generations[i];
    if (stored == state_->values.end() || !is_owner(stored->second, samples.partitions[i], generation)) {
      return state_->values.end();
    }
    return stored;
  };
  // Calls visit(slot) for each of `fields` the sample holds; visit may erase its slot.
  const auto each_field = [&](StoredSample& sample, const auto& visit) {
    for (const std::string& field : fields) {
      const auto slot = sample.fields.find(field);
      if (slot != sample.fields.end()) visit(slot);
    }
  };
  std::vector<VersionedValue::Versions::node_type> dropped;
  dropped.reserve(global_indexes.size() * fields.size());  // usually one per sample and field
  std::unique_lock lock(state_->mutex);
  for (;;) {
    size_t drops = 0;
    for (size_t i = 0; i < global_indexes.size(); ++i) {
      const auto stored = owned(i);
      if (stored == state_->values.end()) continue;
      each_field(stored->second, [&](auto slot) { drops += drops_of(slot->second, version).value_or(0); });
    }
    if (drops <= dropped.capacity()) break;
    lock.unlock();
    dropped.reserve(drops);
    lock.lock();
  }
  for (size_t i = 0; i < global_indexes.size(); ++i) {
    const auto stored = owned(i);
    if (stored == state_->values.end()) continue;
    const size_t dropped_before = dropped.size();
    each_field(stored->second, [&](auto slot) {
      apply(slot->second, version, dropped);
      // A field only ever staged, its write discarded: as if never put.
      if (slot->second.versions().empty()) stored->second.fields.erase(slot);
    });
    storage::Usage freed;
    for (size_t d = dropped_before; d < dropped.size(); ++d) {
      freed.bytes += dropped[d].mapped().nbytes + kValueOverheadBytes;
    }
    if (stored->second.fields.empty()) {
      freed = {1, freed.bytes + kSampleOverheadBytes};
      state_->capacity.release(stored->second.partition, freed);
      state_->values.erase(stored);
      state_->stats.overhead_bytes -= kSampleOverheadBytes;
    } else {
      state_->capacity.release(stored->second.partition, freed);
    }
  }
  state_->stats.samples = state_->values.size();
  for (const auto& node : dropped) state_->stats.bytes -= node.mapped().nbytes;
  state_->stats.overhead_bytes -= kValueOverheadBytes * dropped.size();
  lock.unlock();
  if (!dropped.empty()) state_->room_made.notify_all();
  // `dropped` releases the buffers here, unlocked.
}

void StorageUnit::commit(const SampleKeys& samples, std::span<const std::string> fields) {
  settle_version(samples, fields, Settle::kCommit);
}

void StorageUnit::discard(const SampleKeys& samples, std::span<const std::string> fields) {
  settle_version(samples, fields, Settle::kDiscard);
}

void StorageUnit::clear(std::span<const int64_t> global_indexes) { clear_generations(global_indexes, {}); }

void StorageUnit::clear_generations(std::span<const int64_t> global_indexes, std::span<const uint64_t> generations) {
  if (!generations.empty() && generations.size() != global_indexes.size()) {
    throw_invalid("clear: " + std::to_string(generations.size()) + " generations for " +
                  std::to_string(global_indexes.size()) + " global indexes; give one per index");
  }
  std::vector<Values::node_type> dropped;
  dropped.reserve(global_indexes.size());
  std::unique_lock lock(state_->mutex);
  for (size_t i = 0; i < global_indexes.size(); ++i) {
    auto stored = state_->values.find(global_indexes[i]);
    if (stored == state_->values.end()) continue;
    // An index's generations only grow: every one up to a released one is
    // released too. Generation 0 (loaded from a checkpoint that kept none)
    // is any sample's.
    if (!generations.empty() && stored->second.generation > generations[i]) continue;
    const uint64_t bytes = bytes_of(stored->second.fields);
    const uint64_t overhead = overhead_of(stored->second);
    state_->stats.bytes -= bytes;
    state_->stats.overhead_bytes -= overhead;
    state_->capacity.release(stored->second.partition, {1, bytes + overhead});
    dropped.push_back(state_->values.extract(stored));
  }
  state_->stats.samples = state_->values.size();
  lock.unlock();
  if (!dropped.empty()) state_->room_made.notify_all();
  // `dropped` releases the buffers here, unlocked.
}

void StorageUnit::clear_all() {
  Values dropped;
  std::unique_lock lock(state_->mutex);
  dropped.swap(state_->values);
  state_->stats = {};
  state_->capacity.clear();
  lock.unlock();
  state_->room_made.notify_all();
}

StorageStats StorageUnit::stats() const {
  std::shared_lock lock(state_->mutex);
  return state_->stats;
}

void StorageUnit::save(const std::string& path) const {
  // Views keep their buffers alive, so the file is written without the lock.
  std::vector<StoredValue> snapshot;
  {
    std::shared_lock lock(state_->mutex);
    for (const auto& [gi, sample] : state_->values) {
      for (const auto& [field, value] : sample.fields) {
        for (const auto& [version, view] : value.versions()) {
          snapshot.push_back(
              {gi, sample.generation, sample.partition, field, version, value.committed() == version, view});
        }
      }
    }
  }
  // Sorted so that the same content gives the same file.
  std::sort(snapshot.begin(), snapshot.end(), [](const StoredValue& a, const StoredValue& b) {
    if (a.global_index != b.global_index) return a.global_index < b.global_index;
    return a.field != b.field ? a.field < b.field : a.version < b.version;
  });
  write_checkpoint(path, snapshot);
}

void StorageUnit::load(const std::string& path) { load_part(path, std::span(&path, 1), {}); }

void StorageUnit::load_part(const std::string& path, std::span<const std::string> parts,
                            const std::function<bool(int64_t)>& placed_here) {
  bool placed_in_blocks = false;
  std::vector<StoredValue> records = read_checkpoint(path, &placed_in_blocks);
  if (placed_here && placed_in_blocks) {
    for (const StoredValue& record : records) {
      if (!placed_here(record.global_index)) {
        throw_invalid("checkpoint \"" + path + "\" holds global index " + std::to_string(record.global_index) +
                      ", which another storage unit holds now: it was saved by another number of units (load it "
                      "with as many as saved it)");
      }
    }
  } else if (placed_here) {
    std::vector<StoredValue> mine;
    for (const std::string& part : parts) {
      std::vector<StoredValue> read = part == path ? std::move(records) : read_checkpoint(part);
      for (StoredValue& record : read) {
        if (!placed_here(record.global_index)) continue;
        // A copy: a view would keep the whole of a file that is mostly other units' samples.
        record.view.buffer = Buffer::copy_of(record.view.bytes());
        record.view.offset = 0;
        mine.push_back(std::move(record));
      }
    }
    records = std::move(mine);
  }
  Values loaded;
  StorageStats stats;
  const auto corrupt = [&path](int64_t gi, const std::string& problem) {
    throw_invalid("checkpoint \"" + path + "\" is corrupt: global index " + std::to_string(gi) + ": " + problem);
  };
  for (StoredValue& record : records) {
    stats.bytes += record.view.nbytes;
    auto [at, first] = loaded.try_emplace(record.global_index);
    StoredSample& sample = at->second;
    if (first) {
      sample.generation = record.generation;
      sample.partition = record.partition;
    } else if (sample.generation != record.generation || sample.partition != record.partition) {
      corrupt(record.global_index, "its fields belong to different samples");
    }
    VersionedValue& value = sample.fields[record.field];
    if (const char* problem = value.restore(record.version, record.committed, std::move(record.view))) {
      corrupt(record.global_index, "field \"" + record.field + "\": " + problem);
    }
  }
  stats.samples = loaded.size();
  std::unordered_map<std::string, storage::Usage> partitions;
  for (const auto& [gi, sample] : loaded) {
    stats.overhead_bytes += overhead_of(sample);
    storage::Usage& usage = partitions[sample.partition];
    ++usage.samples;
    usage.bytes += bytes_of(sample.fields) + overhead_of(sample);
    for (const auto& [field, value] : sample.fields) {
      if (const char* problem = value.restored_problem()) corrupt(gi, "field \"" + field + "\": " + problem);
    }
  }
  // The checkpoint replaces the content, so the whole limit is free.
  const std::string requester = "checkpoint \"" + path + "\"";
  check_room("max_bytes", state_->options.max_bytes, 0, stats.bytes + stats.overhead_bytes,
             "bytes (values and their bookkeeping)", requester);
  check_room("max_samples", state_->options.max_samples, 0, stats.samples, "samples", requester);
  // Every allocation before the lock: under it the content and its counts only move in.
  storage::StorageCapacity capacity = storage::StorageCapacity::of_content(state_->options, partitions);
  capacity.check_partitions(partitions, requester);

  std::unique_lock lock(state_->mutex);
  state_->values.swap(loaded);
  state_->stats = stats;
  state_->capacity = std::move(capacity);
  lock.unlock();
  state_->room_made.notify_all();
  // `loaded` now holds the old content; it is released here, unlocked.
}

}  // namespace seqflow
