// The data plane: a column store keyed by (global index, field).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "seqflow/field_versions.h"
#include "seqflow/partition_id_list.h"
#include "seqflow/tensor.h"

namespace seqflow {

// What a put that does not fit does (StorageOptions::when_full).
enum class WhenFull {
  kRaise,  // throws kInvalidArgument "storage full: ..." at once
  kWait,   // waits until clears make room, then stores; at its deadline throws the same, saying it waited
};

struct StorageOptions {
  uint64_t max_bytes = 0;    // 0: unlimited; bounds the values' bytes and their bookkeeping (StorageStats)
  uint64_t max_samples = 0;  // 0: unlimited
  // The same limits for the samples of each partition (0: unlimited).
  uint64_t max_bytes_per_partition = 0;
  uint64_t max_samples_per_partition = 0;
  WhenFull when_full = WhenFull::kRaise;
  // Fractions of each limit: a put fits while usage stays at or below
  // high_watermark x limit; a limit a put found full admits puts again only
  // once usage fell to low_watermark x limit (hysteresis: producers resume
  // in a burst, not one put per freed sample). 0 < low <= high <= 1; no
  // low_watermark: the high one.
  double high_watermark = 1.0;
  std::optional<double> low_watermark = std::nullopt;
  // kWait in this process (StorageUnit::put): the longest a put waits for
  // room. A storage service answers a put that does not fit at once, and
  // the remote client retries within its put's own budget instead.
  std::chrono::milliseconds wait_timeout{30000};
  // kWait in a storage service: the most puts answered "full" that keep a
  // place in line at once (StorageUnit::try_put); a put beyond them is
  // answered "full" with no place, and its client resends it. >= 1.
  size_t max_waiting_puts = 4096;
};

// Throws kInvalidArgument naming the option and its value when one is out
// of range (watermarks, wait_timeout, max_waiting_puts).
void check_storage_options(const StorageOptions& options);

// What capacity did to puts so far (metrics).
struct CapacityStats {
  uint64_t waiting_puts = 0;  // puts waiting for room now (kWait in this process)
  // Puts that found no room and took a place in line to wait (a service's:
  // each place given, which its client's retries then keep).
  uint64_t puts_waited = 0;
  uint64_t puts_refused = 0;  // puts that failed "storage full" (at once, or at their deadline)
  // "No room" answers to puts that wait: each check of a waiting put (after
  // each wake-up), or each "full" a service sent its client (to a try or a
  // room request; also to a put given no place, max_waiting_puts holding one).
  uint64_t full_answers = 0;
};

// What a storage unit counts per sample and per stored value (field) beside
// the values' bytes: estimates of its bookkeeping memory (hash and map nodes,
// names, views), which max_bytes bounds together with the bytes.
inline constexpr uint64_t kSampleOverheadBytes = 128;
inline constexpr uint64_t kValueOverheadBytes = 160;

struct StorageStats {
  uint64_t samples = 0;  // global indexes holding at least one field
  uint64_t bytes = 0;    // bytes of the values held (a shared buffer counts
                         // only the slices still referenced)
  // Memory the unit keeps per sample and per value beside the bytes (an
  // estimate per entry): max_bytes bounds bytes + overhead_bytes, so a
  // million one-byte samples cannot hold far more memory than the limit.
  uint64_t overhead_bytes = 0;
};

// The samples a put or a get means: their global indexes and, for each, the
// partition and the generation the controller gave it (a BatchMeta's). Each
// value is stored with its sample's partition and generation, so that a
// stale BatchMeta (its samples cleared, their indexes handed out again) can
// neither read nor overwrite the values of the samples that hold the indexes
// now: kStaleSample, naming the partition, the index and both generations.
struct SampleKeys {
  std::span<const int64_t> global_indexes;
  const PartitionIdList& partitions;      // one per index
  std::span<const uint64_t> generations;  // one per index; a get may give none (not known): partition checked only
  // A put or a commit: the write's version. 0 (put only): unversioned, the
  // value replaces every version held and is committed at once (new
  // samples). Otherwise the value is staged beside the committed one until
  // commit() names its version.
  uint64_t write_version = 0;
  // A get: per field, the version each sample reads (a BatchMeta's
  // versions). A field not named, or 0, reads the committed value; a version
  // at or below the committed one reads the committed value (it is newer);
  // a staged version above it reads that staged value (committed by the
  // controller, its commit not yet seen here).
  const FieldVersions* read_versions = nullptr;
  // A commit or a discard to storage units over the wire: per unit, the
  // write's tag from the controller (SampleProduction::write_tags); a unit
  // refuses either without its tag. Empty in-process.
  std::span<const uint64_t> write_tags = {};
  // A put that waits for room (WhenFull::kWait) runs each of its waits as
  // (*around_wait)(wait), which must call wait() once: its caller releases
  // its own locks meanwhile, so that the clears that make room can run.
  const std::function<void(const std::function<void()>& wait)>* around_wait = nullptr;
};

// The data plane's calls, served by a StorageUnit in this process or by
// storage services (remote mode, sample gi on unit (gi / kPlacementBlock) % N). Thread-safe.
// Writes are all-or-nothing: a put that fails (capacity, bad column) changes
// nothing.
class DataPlane {
 public:
  virtual ~DataPlane() = default;

  // Stores columns[c].sample(i) under (global index i, columns[c].field);
  // every column must hold one sample per index. An unversioned put
  // overwrites values already stored for the same sample; a versioned one
  // (samples.write_version) stages them beside the committed value, and is
  // ignored where a version at least as new is committed already. An index that holds an older generation's
  // values drops them all first (they belong to a cleared sample); one that
  // holds a newer generation, or the same of another partition, throws
  // kStaleSample. Throws kInvalidArgument on bad columns or duplicate
  // indexes, and when full (naming the limit, the requested and the free
  // amount).
  virtual void put(const SampleKeys& samples, const std::vector<Column>& columns) = 0;

  // Views of the requested fields, one row per global index, in the given
  // order: result[i][f] is fields[f] of sample i. The views share the put's
  // buffer (no copy) and keep it alive after clear(). An index without
  // values, or with another sample's, throws kStaleSample; a missing field
  // kNotFound naming it, and a read version this unit does not hold (nor a
  // newer committed one) kNotFound naming the field, the version, the index
  // and the partition. samples.read_versions must hold one version per
  // sample for each field it names (else kInvalidArgument).
  virtual std::vector<std::vector<SampleView>> get(const SampleKeys& samples,
                                                   std::span<const std::string> fields) const = 0;

  // Makes samples.write_version the committed value of these fields of these
  // samples where it is held and newer than the committed one, and drops
  // the older versions. Anything else is ignored: a version that lost to a
  // newer one, one never stored here, an index holding nothing or another
  // sample's values (cleared and reused since). write_version 0 is
  // kInvalidArgument.
  virtual void commit(const SampleKeys& samples, std::span<const std::string> fields) = 0;
  // Drops samples.write_version of these fields where it is staged (not
  // committed): the undo of a put the controller refused, so that it leaves
  // nothing behind. Anything else is ignored, as by commit.
  virtual void discard(const SampleKeys& samples, std::span<const std::string> fields) = 0;

  // Drops every field of these indexes; unknown indexes are ignored.
  virtual void clear(std::span<const int64_t> global_indexes) = 0;
  // clear() of the samples that hold these generations or older ones (one
  // per index; an index's generations only grow, so all of those are
  // released): data that a newer sample put under a reused index stays.
  virtual void clear_generations(std::span<const int64_t> global_indexes, std::span<const uint64_t> generations) = 0;
  virtual void clear_all() = 0;

  virtual StorageStats stats() const = 0;

  // Checkpoint: every stored value, in one file (atomic: written to a
  // temporary name, then renamed). load replaces the content, or throws and
  // leaves it unchanged.
  virtual void save(const std::string& path) const = 0;
  virtual void load(const std::string& path) = 0;
};

// The data plane in this process: a column store behind one reader-writer lock.
class StorageUnit final : public DataPlane {
 public:
  explicit StorageUnit(StorageOptions options = {});
  StorageUnit(const StorageUnit&) = delete;
  StorageUnit& operator=(const StorageUnit&) = delete;

  void put(const SampleKeys& samples, const std::vector<Column>& columns) override;
  std::vector<std::vector<SampleView>> get(const SampleKeys& samples,
                                           std::span<const std::string> fields) const override;
  void commit(const SampleKeys& samples, std::span<const std::string> fields) override;
  void discard(const SampleKeys& samples, std::span<const std::string> fields) override;
  void clear(std::span<const int64_t> global_indexes) override;
  void clear_generations(std::span<const int64_t> global_indexes, std::span<const uint64_t> generations) override;
  void clear_all() override;
  StorageStats stats() const override;
  void save(const std::string& path) const override;
  void load(const std::string& path) override;
  // load() of one storage service's part of a remote checkpoint: `parts`
  // (every unit's, its own among them at `path`) and which global indexes
  // this unit holds (remote mode's placement). A part saved since samples
  // are placed in blocks holds only its unit's: only `path` is read, and a
  // sample placed elsewhere (a part saved by another number of units)
  // throws. An older part held gi % N: the unit picks its samples out of
  // every part, copying them out of the others' files. Without
  // `placed_here`, as load(path).
  void load_part(const std::string& path, std::span<const std::string> parts,
                 const std::function<bool(int64_t)>& placed_here);

  // A waiting put's ticket: a random secret the unit hands its client with
  // the "full" answer. Only a caller that holds it keeps the put's place
  // in line, asks for it or gives it up: the put's samples, which a peer
  // can guess, are not enough.
  using Ticket = std::array<uint8_t, 16>;
  struct Full {
    std::string message;           // why the put does not fit ("storage full: ...")
    std::optional<Ticket> ticket;  // nullopt: it holds no place (max_waiting_puts do)
  };
  // put() that never waits, for a storage service (whose waiting puts must
  // hold no thread): where put() would wait (kWait), it stores nothing and
  // answers why the put does not fit; otherwise as put() (stored: nullopt;
  // a put that can never fit throws). A put answered so keeps its place in
  // line (waiting puts are served in order) while its client tries it again
  // (the same samples of the same write, with the answer's `ticket`)
  // within kRetriedPutPlace; at most max_waiting_puts hold a place. A put
  // without a valid ticket takes a new place, behind those there, even
  // when another put of the same samples holds one.
  std::optional<Full> try_put(const SampleKeys& samples, const std::vector<Column>& columns,
                              const std::optional<Ticket>& ticket = std::nullopt);
  // try_put() of values in segments of consecutive samples, stored as one
  // put: segment k holds the samples after those of segments 0..k-1, each
  // field of them in one Column, and every segment names the same fields in
  // the same order (a storage service's put whose client sent runs of
  // samples as frames of their own, without packing them into one).
  std::optional<Full> try_put_segments(const SampleKeys& samples, std::span<const std::vector<Column>> segments,
                                       const std::optional<Ticket>& ticket = std::nullopt);
  static constexpr std::chrono::milliseconds kRetriedPutPlace{1000};
  // The longest a retried put keeps one place (from its first "full"
  // answer): a peer that keeps asking but never fits holds the line no
  // longer; its put, retried still, goes to the back.
  static constexpr std::chrono::minutes kMostRetriedPutPlace{10};
  // A put try_put answered "full", named without its values: its first
  // sample and generation, its write version and its number of samples.
  struct RetriedPut {
    int64_t first_index = 0;
    uint64_t first_generation = 0;
    uint64_t write_version = 0;
    uint64_t samples = 0;
    auto operator<=>(const RetriedPut&) const = default;
  };
  struct Room {
    bool placed = false;                    // false: no waiting put of these samples holds this ticket
    std::optional<std::string> full;        // placed: why it does not fit yet, or nullopt: it fits
    std::optional<std::string> not_placed;  // !placed: why (its place lapsed, or the ticket is not its)
  };
  // Whether `put` fits now, from the room it asked for at its last try:
  // its client sends the values only then (or when it holds no place), not
  // on every try. Either way its place is kept until its next try; the put
  // itself decides, all or nothing. A wrong ticket changes nothing.
  Room room_for(const RetriedPut& put, const Ticket& ticket);
  // `put` gave up (its client's deadline): its place goes to those behind
  // it. placed: it held one; a wrong ticket changes nothing.
  Room leave_line(const RetriedPut& put, const Ticket& ticket);
  CapacityStats capacity_stats() const;
  // Bytes (values and bookkeeping) and samples held per partition; empty
  // unless a per-partition limit is set (only then are they counted).
  struct PartitionUsage {
    std::string partition;
    uint64_t samples = 0;
    uint64_t bytes = 0;
  };
  std::vector<PartitionUsage> partition_usage() const;
  const StorageOptions& options() const;

  ~StorageUnit() override;

 private:
  struct State;  // the values, their lock and counts (src/storage/storage_unit.cc)
  enum class Settle { kCommit, kDiscard };
  // put() and try_put(): waits for room only with `wait`; `ticket`: a
  // retried put's (try_put).
  std::optional<Full> store(const SampleKeys& samples, std::span<const std::vector<Column>> segments, bool wait,
                            const std::optional<Ticket>& ticket);
  // commit and discard: one walk over the samples' stored fields.
  void settle_version(const SampleKeys& samples, std::span<const std::string> fields, Settle settle);
  std::unique_ptr<State> state_;
};

}  // namespace seqflow
