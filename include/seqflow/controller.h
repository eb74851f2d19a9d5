// The control plane: which samples exist, which of their fields are produced,
// which task consumed which sample, and who gets which samples next. Metadata
// only; the bytes live in storage.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "seqflow/batch_meta.h"
#include "seqflow/calibration.h"
#include "seqflow/field_versions.h"
#include "seqflow/partition_keys.h"
#include "seqflow/replay.h"
#include "seqflow/sampler.h"
#include "seqflow/tensor.h"
#include "seqflow/value.h"
#include "seqflow/watch.h"

namespace seqflow {

enum class MetaMode {
  kInsert,      // allocate new samples
  kFetch,       // ready samples through the sampler; marks them consumed
  kForceFetch,  // every sample of the partition; consumes nothing
};
MetaMode parse_meta_mode(std::string_view name);  // "insert", "fetch", "force_fetch"

struct MetaRequest {
  std::vector<std::string> fields;
  int64_t batch_size = 0;
  std::string partition_id;
  MetaMode mode = MetaMode::kFetch;
  std::string task_name;
  SamplingConfig sampling;
  // Fetch only. Polling: an empty batch at once when too little is ready
  // (unless the sampler holds this caller's answer). Otherwise wait up to
  // `timeout` for enough data, then throw kTimeout. A request polls when it
  // says so or when ControllerOptions::polling_mode is set. A partition that
  // does not exist (yet, or any more) has nothing ready: a waiting fetch
  // waits for it to be created and filled. force_fetch ignores batch_size
  // and consumes nothing: it returns every sample of the partition (also
  // those lacking a requested field; production_status tells), an empty
  // batch for a partition that does not exist.
  bool polling = false;
  std::chrono::milliseconds timeout{30000};
  // Fetch only. Above 0, the samples this fetch consumes are leased to the
  // task for this long (at most kMaxLease): acknowledged (end_leases), they
  // stay consumed; released, or unacknowledged when the lease expires, they
  // are given back (unconsumed again, in arrival order) and served again.
  // A lease covers what the fetch hands out: a sampler that consumes other
  // ranks' shares with it leaves them to the fetches it serves them to, and
  // a repeat of a reserved answer (a tensor-parallel rank) moves it to the
  // repeat's lease.
  std::chrono::milliseconds lease{0};
};

// The longest lease a fetch may take (a week).
inline constexpr std::chrono::milliseconds kMaxLease = std::chrono::hours(24 * 7);

// ControlPlane::sample_production's answer, in the order of the samples asked.
struct SampleProduction {
  size_t field_count = 0;
  std::vector<uint8_t> exists;        // per sample: 1 while it lives in the partition
  std::vector<uint64_t> generations;  // per sample: its generation (0 where it does not exist)
  std::vector<uint8_t> produced;      // per sample, per field (row-major): 1 if produced
  // A write version no other write has, above every one committed so far:
  // the version of the overwrite this answer precedes.
  uint64_t write_version = 0;
  // Remote mode: per storage unit (in the controller's unit order), the tag
  // that unit takes to commit or discard write_version; empty in-process.
  std::vector<uint64_t> write_tags;

  bool has(size_t sample, size_t field) const { return produced[sample * field_count + field] != 0; }
};

// ControlPlane::mark_produced's answer to an overwrite: what readers see
// now, so that the writer's BatchMeta names it (a newer write may have won
// some samples and fields, and the writer's own staged values there are
// never committed).
struct CommittedWrite {
  // Per field written, per sample asked: the committed version (the
  // write's own where it won).
  FieldVersions versions;
  // Positions among the samples asked whose tags are a newer write's, and
  // those tags (the write's custom_meta did not land there).
  std::vector<int64_t> newer_meta_positions;
  std::vector<Value> newer_metas;
};

// ControlPlane::production_status's answer: a partition's samples, ascending
// by global index, and which of the asked fields each has produced.
struct ProductionStatus {
  std::vector<int64_t> global_indexes;
  size_t field_count = 0;
  std::vector<uint8_t> produced;  // per sample, per field (row-major): 1 if produced

  bool has(size_t sample, size_t field) const { return produced[sample * field_count + field] != 0; }
  bool has_all(size_t sample) const {
    for (size_t field = 0; field < field_count; ++field) {
      if (!has(sample, field)) return false;
    }
    return true;
  }
};

// ControlPlane::policy_versions's answer, one per sample asked, in order: the
// policy version current when the sample was inserted (start), and when a
// put last left it with every field of its partition produced (finish;
// kUnfinished until then).
struct PolicyVersions {
  static constexpr int64_t kUnfinished = -1;
  std::vector<int64_t> start;
  std::vector<int64_t> finish;
};

// How far a partition has come: for the metrics endpoint.
struct PartitionProgress {
  std::string partition_id;
  size_t samples = 0;
  std::map<std::string, size_t> produced;  // per field: samples that have it
  std::map<std::string, size_t> consumed;  // per task: samples it consumed
  std::map<std::string, size_t> leased;    // per task: consumed samples under a lease not yet ended
};

struct ControllerOptions {
  std::shared_ptr<Sampler> sampler;  // null: sequential
  bool polling_mode = false;         // every fetch polls (seqflow serve controller --polling-mode)
  // The alignment every task's online workload model is fitted with
  // (report_timing; CalibrationOptions::alignment): > 1 also fits the extra
  // cost of sequence lengths that are not a multiple of it. 1: no such term.
  int64_t timing_alignment = 1;
};

// A task's measured workload model, fitted to the micro-batch timings its
// ranks reported (ControlPlane::report_timing).
struct TaskWorkload {
  std::string task_name;
  Workload workload = Workload::tokens();  // the current fit; tokens until there is one
  int64_t reports = 0;                     // micro-batches reported
  bool fitted = false;                     // workload is a fit (enough reports came)
};

// The control plane's calls, served by a Controller in this process or by a
// controller service (remote mode). Thread-safe. Every mutating call either
// completes or throws with the state unchanged. Global indexes are unique
// among live samples of all partitions; indexes of cleared samples are reused,
// each time with a new generation. Calls that name samples of a BatchMeta
// take its generations (one per index, or empty when not known) and throw
// kStaleSample, changing nothing, for a sample that is gone or whose index
// now holds another sample.
class ControlPlane {
 public:
  virtual ~ControlPlane() = default;

  // Allocates `count` new samples in `partition_id` (created if new: then
  // *created, when given, is set true, else false; one atomic step, so two
  // callers never both create it). The samples exist but have no produced
  // field yet. The samples of one insert are one "put call" for GRPO
  // grouping (see SampleInfo::group_key).
  virtual BatchMeta insert(const std::string& partition_id, int64_t count, bool* created = nullptr) = 0;

  // Marks `fields` produced for these samples, with their schema (merged into
  // the partition's schema; a dtype conflict is an error) and, when given, one
  // custom_meta object per sample (merged key by key). All of it becomes
  // visible at once, under one lock; callers call it after storage holds the
  // data. Marking a cleared or unknown sample throws kStaleSample and changes
  // nothing.
  // Schema merge: dtype and tensor-vs-object must match; tensors must keep
  // their number of dims; dims that differ become -1 and the field nested.
  // custom_meta "total_lengths" must be a non-negative integer and
  // "group_id" a scalar.
  // write_version: 0 for new samples' first write; an overwrite's version
  // (from sample_production) commits it: per sample and field the highest
  // version wins (an older one that arrives later changes nothing there),
  // and its custom_meta lands only where no newer write's did, so one
  // write's data and tags are seen together. Returns, for an overwrite,
  // what is committed now (CommittedWrite); for a first write, nothing.
  virtual CommittedWrite mark_produced(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                       std::span<const uint64_t> generations,
                                       const std::map<std::string, FieldSchema>& fields,
                                       std::span<const Value> custom_meta, uint64_t write_version = 0) = 0;

  virtual BatchMeta get_meta(const MetaRequest& request) = 0;

  virtual void set_custom_meta(const std::string& partition_id, std::span<const int64_t> global_indexes,
                               std::span<const uint64_t> generations, std::span<const Value> custom_meta) = 0;

  // Both return the global indexes they released (ascending), for the storage
  // to drop. What is gone already (a partition that does not exist, a sample
  // that is not a live sample of the partition) is skipped, as TransferQueue
  // does: clearing twice is not an error. An index that holds another
  // generation now (the sample was cleared, the index reused) throws
  // kStaleSample: the new sample is not cleared.
  virtual std::vector<int64_t> clear_samples(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                             std::span<const uint64_t> generations) = 0;
  virtual std::vector<int64_t> clear_partition(const std::string& partition_id) = 0;
  // Removes those of the samples that are still live (of these generations;
  // empty: any) and have no field produced: an insert whose producer never
  // put its data (remote mode: its lease expired), or keys a kv_put made
  // whose write failed (one that landed unseen, its reply lost, stays).
  // Produced or gone samples are skipped. Returns the released global
  // indexes, ascending, for the storage to drop.
  virtual std::vector<int64_t> reclaim_unproduced(const std::string& partition_id,
                                                  std::span<const int64_t> global_indexes,
                                                  std::span<const uint64_t> generations) = 0;
  // Removes the partition if it holds no sample and no task has fetched from
  // it, in one step (a put that failed undoes the partition it made, never
  // one another put filled or a consumer uses meanwhile). True if it removed it.
  virtual bool forget_partition_if_empty(const std::string& partition_id) = 0;

  // Every task, or one. A partition that does not exist has nothing to reset.
  virtual void reset_consumption(const std::string& partition_id, const std::string* task_name) = 0;

  // Ends the task's leases (MetaRequest::lease) of these samples (of these
  // generations; empty: any) held under `lease` (BatchMeta::lease; 0: under
  // any lease: a batch made by hand, or cut from the fetched one). Acknowledged (release false), they stay
  // consumed: that work is done, and never served again. Released, they are
  // given back now, unconsumed, to be served again. Samples the task holds
  // no lease of (never leased, or the lease expired and they went back, or
  // it was reset) are skipped: a late acknowledgement learns from the count
  // that its samples may be served again. Returns the leases it ended.
  virtual size_t end_leases(const std::string& partition_id, const std::string& task_name,
                            std::span<const int64_t> global_indexes, std::span<const uint64_t> generations,
                            bool release, uint64_t lease) = 0;

  // Per sample of the partition (ascending global index): consumed by the
  // task? Nullopt for a partition that does not exist.
  virtual std::optional<std::vector<std::pair<int64_t, bool>>> consumption_status(
      const std::string& task_name, const std::string& partition_id) const = 0;
  // Per sample, per field: produced? A field the partition has never had is
  // produced nowhere. Nullopt for a partition that does not exist.
  virtual std::optional<ProductionStatus> production_status(std::span<const std::string> fields,
                                                            const std::string& partition_id) const = 0;
  // Of these samples only (O(samples x fields), not O(partition)): for each,
  // whether it exists in the partition, its generation and which of `fields`
  // it has produced, and a fresh write version. In a partition that does
  // not exist, none does. A sample whose index holds another generation than
  // `generations` says throws kStaleSample.
  virtual SampleProduction sample_production(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                             std::span<const uint64_t> generations,
                                             std::span<const std::string> fields) = 0;
  // Both false for a partition without samples or that does not exist.
  virtual bool all_consumed(const std::string& task_name, const std::string& partition_id) const = 0;
  virtual bool all_produced(std::span<const std::string> fields, const std::string& partition_id) const = 0;
  // Oldest first, as TransferQueue lists them. Partitions exist from their
  // first insert (or key) until clear_partition; clearing their samples one
  // by one leaves them listed, empty.
  virtual std::vector<std::string> partition_list() const = 0;

  // Key-value API: a key names one sample of a partition. Unknown keys get
  // new samples (one put call); known keys return their sample. A key's tag
  // is its sample's custom_meta: tags (empty, or one object or null per key)
  // are merged into it key by key; null leaves it as it is. *created, when
  // given, tells whether this call made the partition (as insert's does);
  // *made_keys, one flag per key, whether this call made the key's sample
  // (so that a writer whose put fails removes only keys it made, never one
  // another writer made meanwhile).
  virtual BatchMeta kv_resolve(const std::string& partition_id, std::span<const std::string> keys,
                               std::span<const Value> tags, bool* created = nullptr,
                               std::vector<uint8_t>* made_keys = nullptr) = 0;
  // Known keys only: a missing key throws kNotFound naming it.
  virtual BatchMeta kv_lookup(const std::string& partition_id, std::span<const std::string> keys) const = 0;
  // The known keys among `keys`, in the order given; unknown keys, and every
  // key of a partition that does not exist, are left out (TransferQueue's
  // kv_retrieve_meta without create). Costs the keys asked, not the partition.
  virtual BatchMeta kv_find(const std::string& partition_id, std::span<const std::string> keys) const = 0;
  // The key of each sample, in the order asked. A sample without a key (or
  // not in the partition, or a partition that does not exist) throws
  // kNotFound naming it.
  virtual std::vector<std::string> kv_keys(const std::string& partition_id,
                                           std::span<const int64_t> global_indexes) const = 0;
  // The keys of the partition, or of every partition (null; oldest first),
  // with their tags; a partition without keys is listed with none. A
  // partition that does not exist is not listed.
  virtual std::vector<PartitionKeys> kv_list(const std::string* partition_id) const = 0;
  // Releases the keys' samples; keys (or a partition) that do not exist are
  // skipped, as TransferQueue does. An empty key is an error.
  virtual std::vector<int64_t> kv_clear(const std::string& partition_id, std::span<const std::string> keys) = 0;
  // One pass of verl's replay-buffer loop over the partition's prompt and
  // trajectory keys (seqflow/replay.h); bad options throw kInvalidArgument
  // naming them. Released samples' indexes are in the answer, for the
  // storage to drop (as kv_clear's).
  virtual ReplayPass replay_pass(const ReplayRequest& request) = 0;
  // The changes of the partition's samples since request.cursor that pass
  // request.filter (seqflow/watch.h), oldest first; waits up to
  // request.wait while there are none. A cursor of 0 starts watching (the
  // partition need not exist yet): the answer holds only the cursor.
  // Costs the changes since the cursor, not the partition's keys. Bad
  // arguments throw kInvalidArgument naming them.
  virtual WatchBatch watch(const WatchRequest& request) = 0;
  // Ends a pass kept under `pass_id` (ReplayPass::kept): its selected prompt
  // keys are cleared. Acknowledging again answers true and clears nothing.
  virtual ReplayAck ack_replay_pass(const std::string& partition_id, uint64_t pass_id) = 0;
  // verl's trainer on resume, under the lock: the partition's prompt keys
  // whose tag status is pending or running are tagged pending at
  // `global_steps` (merged, as kv_put merges tags), and their trajectory keys
  // `{uid}_...` released. A partition that does not exist re-issues nothing.
  // `member_status` (ReplayOptions::member_status): also a finished or
  // failure prompt one of whose trajectories is tagged pending or running
  // (its generation died with the run), unless a kept pass holds it; a
  // trajectory status that is none of the five names, in such a prompt's
  // group, throws kInvalidArgument naming its key, changing nothing.
  virtual ReissuedPrompts reissue_inflight_prompts(const std::string& partition_id, int64_t global_steps,
                                                   bool member_status) = 0;

  // The trainer's policy version, 0 until set: samples inserted from now on
  // start at it, and puts that complete a sample finish it at it. It never
  // goes back: a smaller one (or one outside [0, kMaxPolicyVersion]) throws
  // kInvalidArgument naming `version`, changing nothing; the same one is
  // accepted (a trainer that retries).
  virtual void set_policy_version(int64_t version) = 0;
  virtual int64_t policy_version() const = 0;
  // The samples' policy versions (PolicyVersions). A global index that is
  // no live sample of the partition, or a partition that does not exist,
  // throws kNotFound naming it.
  virtual PolicyVersions policy_versions(const std::string& partition_id,
                                         std::span<const int64_t> global_indexes) const = 0;
  // The same of keyed samples; an unknown key throws kNotFound naming it.
  virtual PolicyVersions kv_policy_versions(const std::string& partition_id,
                                            std::span<const std::string> keys) const = 0;

  // Checkpoint of everything above, including the sampler's state. Atomic on
  // disk; load throws and leaves the running state unchanged on a missing or
  // corrupt file.
  virtual void save(const std::string& path) const = 0;
  virtual void load(const std::string& path) = 0;

  // How long micro-batches of `task_name` took on the rank that ran them
  // (sequence lengths, seconds). The controller keeps one OnlineWorkload per
  // task, refitted in the background; samplers whose workload is "online"
  // balance the task's fit. Every record is checked before any is taken.
  virtual void report_timing(const std::string& task_name, std::span<const TimingRecord> records) = 0;
  // The task's model; nullopt for a task that never reported.
  virtual std::optional<TaskWorkload> task_workload(const std::string& task_name) const = 0;
};

// The control plane in this process. Every call takes one mutex; blocking
// fetches wait on a condition variable, so a waiting caller holds nothing.
class Controller final : public ControlPlane {
 public:
  explicit Controller(ControllerOptions options = {});
  ~Controller() override;

  BatchMeta insert(const std::string& partition_id, int64_t count, bool* created = nullptr) override;
  CommittedWrite mark_produced(const std::string& partition_id, std::span<const int64_t> global_indexes,
                               std::span<const uint64_t> generations, const std::map<std::string, FieldSchema>& fields,
                               std::span<const Value> custom_meta, uint64_t write_version = 0) override;
  BatchMeta get_meta(const MetaRequest& request) override;
  // get_meta without waiting: nullopt where get_meta would wait for data
  // (a fetch that does not poll, with too little ready or no partition yet).
  // *returnable, when given: the answer consumed exactly the samples it
  // holds and nothing was reserved (for this caller earlier, or for other
  // ranks now), so give_back may undo it if it reaches nobody.
  std::optional<BatchMeta> try_get_meta(const MetaRequest& request, bool* returnable = nullptr);
  // The last pass of a fetch that waited elsewhere (a service's waiter) for
  // `waited`: the batch if it is ready now, else get_meta's kTimeout.
  BatchMeta get_meta_at_deadline(const MetaRequest& request, std::chrono::milliseconds waited,
                                 bool* returnable = nullptr);
  void set_custom_meta(const std::string& partition_id, std::span<const int64_t> global_indexes,
                       std::span<const uint64_t> generations, std::span<const Value> custom_meta) override;
  std::vector<int64_t> clear_samples(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                     std::span<const uint64_t> generations) override;
  std::vector<int64_t> clear_partition(const std::string& partition_id) override;
  std::vector<int64_t> reclaim_unproduced(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                          std::span<const uint64_t> generations) override;
  bool forget_partition_if_empty(const std::string& partition_id) override;
  void reset_consumption(const std::string& partition_id, const std::string* task_name) override;
  size_t end_leases(const std::string& partition_id, const std::string& task_name,
                    std::span<const int64_t> global_indexes, std::span<const uint64_t> generations, bool release,
                    uint64_t lease) override;
  // Gives back the samples of the leases that expired by now (get_meta and
  // end_leases do it too, before they look), and the prompts of kept replay
  // passes whose lease ended (watchers are told). Returns the earliest
  // expiry of either still held, for a caller that wakes up then (a service).
  std::optional<std::chrono::steady_clock::time_point> expire_leases();
  std::optional<std::vector<std::pair<int64_t, bool>>> consumption_status(
      const std::string& task_name, const std::string& partition_id) const override;
  std::optional<ProductionStatus> production_status(std::span<const std::string> fields,
                                                    const std::string& partition_id) const override;
  SampleProduction sample_production(const std::string& partition_id, std::span<const int64_t> global_indexes,
                                     std::span<const uint64_t> generations,
                                     std::span<const std::string> fields) override;
  bool all_consumed(const std::string& task_name, const std::string& partition_id) const override;
  bool all_produced(std::span<const std::string> fields, const std::string& partition_id) const override;
  std::vector<std::string> partition_list() const override;
  BatchMeta kv_resolve(const std::string& partition_id, std::span<const std::string> keys, std::span<const Value> tags,
                       bool* created = nullptr, std::vector<uint8_t>* made_keys = nullptr) override;
  BatchMeta kv_lookup(const std::string& partition_id, std::span<const std::string> keys) const override;
  BatchMeta kv_find(const std::string& partition_id, std::span<const std::string> keys) const override;
  std::vector<std::string> kv_keys(const std::string& partition_id,
                                   std::span<const int64_t> global_indexes) const override;
  std::vector<PartitionKeys> kv_list(const std::string* partition_id) const override;
  // kv_list for an asker that holds the listings `known` names: a partition
  // whose version is the one known comes as PartitionKeys::unchanged.
  std::vector<PartitionKeys> kv_list(const std::string* partition_id,
                                     const std::map<std::string, ListingVersion>& known) const;
  std::vector<int64_t> kv_clear(const std::string& partition_id, std::span<const std::string> keys) override;
  ReplayPass replay_pass(const ReplayRequest& request) override;
  WatchBatch watch(const WatchRequest& request) override;
  ReplayAck ack_replay_pass(const std::string& partition_id, uint64_t pass_id) override;
  void set_policy_version(int64_t version) override;
  int64_t policy_version() const override;
  PolicyVersions policy_versions(const std::string& partition_id,
                                 std::span<const int64_t> global_indexes) const override;
  PolicyVersions kv_policy_versions(const std::string& partition_id, std::span<const std::string> keys) const override;
  ReissuedPrompts reissue_inflight_prompts(const std::string& partition_id, int64_t global_steps,
                                           bool member_status) override;
  void save(const std::string& path) const override;
  void load(const std::string& path) override;
  void report_timing(const std::string& task_name, std::span<const TimingRecord> records) override;
  std::optional<TaskWorkload> task_workload(const std::string& task_name) const override;
  // Every task that reported timings, by name (for metrics).
  std::vector<TaskWorkload> task_workloads() const;
  // load() for a controller starting from a checkpoint: it also takes the
  // saver's incarnation, so that the storage units keep what they hold from it.
  void start_from(const std::string& path);
  // See core::ControlData::incarnation.
  uint64_t incarnation() const;

  // A fetched batch that reached nobody (its reply could not be sent): its
  // samples become unconsumed by `task_name` again, in their arrival order,
  // so the next fetch serves them. Only for an answer try_get_meta called
  // returnable (a sampler's reservations are never undone). Samples cleared
  // or reused since (by generation) are skipped; the fetch's `lease`
  // (BatchMeta::lease), if it took one, ends. Returns how many were given back.
  size_t give_back(const std::string& partition_id, const std::string& task_name,
                   std::span<const int64_t> global_indexes, std::span<const uint64_t> generations, uint64_t lease = 0);

  // The generation each index had when it was last handed out: a released
  // index keeps it until it is handed out again (so a caller that keeps
  // inserts out meanwhile learns what the storage may still hold under it).
  // An index never handed out throws kInvalidArgument naming it.
  std::vector<uint64_t> last_generations(std::span<const int64_t> global_indexes) const;

  // `listener` is told (with the partition, or null for every one) after a
  // change that may let a waiting fetch proceed: samples added, produced,
  // given back or cleared, consumption reset, a checkpoint loaded. It runs
  // under the controller's lock and must not call the controller; set it
  // before other threads use the controller. It must not throw: told after
  // the change is made, the op has succeeded, so an exception terminates.
  void on_change(std::function<void(const std::string* partition_id)> listener);

  // Walks every sample under the lock: for scrapes, not for hot paths.
  std::vector<PartitionProgress> progress() const;

  // Storage lost the data of some samples (remote mode: a storage unit came
  // back empty after a restart). Every live sample of `partition_id` (null:
  // of every partition) whose global index `lost` selects becomes produced
  // for no field, at once under the lock: no fetch serves it (an answer a
  // sampler reserved earlier waits for it) and force_fetch skips it until a
  // put marks its fields produced again. Consumption, custom_meta,
  // keys and schemas stay: a sample a task consumed is not served to it
  // again. `lost` runs under the controller's lock and must not call it.
  // Returns the global indexes that had a field produced, ascending. An
  // unknown partition throws kNotFound naming it; an empty `lost` throws
  // kInvalidArgument; nothing changes then. Walks every sample it looks at.
  std::vector<int64_t> forget_production(const std::string* partition_id, const std::function<bool(int64_t)>& lost);

 private:
  struct State;
  // One pass of get_meta, the lock held. Nullopt only for a fetch that has
  // to wait for data (a polling fetch gets an empty batch instead).
  std::optional<BatchMeta> answer_without_waiting(const MetaRequest& request, bool* returnable);
  // The lock held.
  [[noreturn]] void throw_fetch_timeout(const MetaRequest& request, std::chrono::milliseconds waited) const;
  void load_checkpoint(const std::string& path, bool take_incarnation);

  std::unique_ptr<State> state_;
};

}  // namespace seqflow
