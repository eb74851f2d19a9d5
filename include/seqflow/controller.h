// The control plane: which samples exist, which of their fields are produced,
// which task consumed which sample, and who gets which samples next. Metadata
// only; the bytes live in storage.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "seqflow/sampler.h"
#include "seqflow/tensor.h"

namespace seqflow {

enum class MetaMode {
  kInsert,      // allocate new samples
  kFetch,       // ready samples through the sampler; marks them consumed
  kForceFetch,  // every sample of the partition; consumes nothing
};
MetaMode parse_meta_mode(std::string_view name);  // "insert", "fetch", "force_fetch"

// TransferQueue's field_schema entry.
struct FieldSchema {
  DType dtype = DType::kUInt8;
  Shape shape;             // per-sample shape when all samples share it
  bool is_nested = false;  // per-sample shapes differ (variable length)
  bool is_object = false;  // opaque objects (TransferQueue: is_non_tensor)

  bool operator==(const FieldSchema&) const = default;
};

struct BatchMeta {
  std::vector<int64_t> global_indexes;
  std::vector<std::string> partition_ids;  // one per sample
  std::map<std::string, FieldSchema> field_schema;
  // Per sample: for each field of field_schema, produced or not.
  std::vector<std::vector<bool>> production_status;
  std::vector<nlohmann::json> custom_meta;  // one object per sample
  nlohmann::json extra_info = nlohmann::json::object();

  size_t size() const { return global_indexes.size(); }
};

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
  // says so or when ControllerOptions::polling_mode is set. force_fetch
  // ignores batch_size: it returns every sample with all `fields` produced.
  bool polling = false;
  std::chrono::milliseconds timeout{30000};
};

struct ControllerOptions {
  std::shared_ptr<Sampler> sampler;  // null: sequential
  bool polling_mode = false;         // default for requests that do not say
};

// Thread-safe. Every mutating call either completes or throws with the state
// unchanged. Global indexes are unique among live samples of all partitions;
// indexes of cleared samples are reused.
class Controller {
 public:
  explicit Controller(ControllerOptions options = {});
  ~Controller();

  // Allocates `count` new samples in `partition_id` (created if new). The
  // samples exist but have no produced field yet. The samples of one insert
  // are one "put call" for GRPO grouping (see SampleInfo::group_key).
  BatchMeta insert(const std::string& partition_id, int64_t count);

  // Marks `fields` produced for these samples, with their schema (merged into
  // the partition's schema; a dtype conflict is an error) and, when given, one
  // custom_meta object per sample (merged key by key). All of it becomes
  // visible at once, under one lock; callers call it after storage holds the
  // data. Marking a cleared or unknown sample throws and changes nothing.
  // Schema merge: dtype and tensor-vs-object must match; tensors must keep
  // their number of dims; dims that differ become -1 and the field nested.
  // custom_meta "total_lengths" must be a non-negative integer and
  // "group_id" a scalar.
  void mark_produced(const std::string& partition_id, std::span<const int64_t> global_indexes,
                     const std::map<std::string, FieldSchema>& fields,
                     std::span<const nlohmann::json> custom_meta);

  BatchMeta get_meta(const MetaRequest& request);

  void set_custom_meta(const std::string& partition_id, std::span<const int64_t> global_indexes,
                       std::span<const nlohmann::json> custom_meta);

  // Both return the global indexes they released (ascending), for the storage
  // to drop. A sample or partition that does not exist throws kNotFound.
  std::vector<int64_t> clear_samples(const std::string& partition_id,
                                     std::span<const int64_t> global_indexes);
  std::vector<int64_t> clear_partition(const std::string& partition_id);

  // Every task, or one.
  void reset_consumption(const std::string& partition_id, const std::string* task_name);

  // Per sample of the partition (ascending global index): consumed by the task?
  std::vector<std::pair<int64_t, bool>> consumption_status(const std::string& task_name,
                                                           const std::string& partition_id) const;
  // Per sample: all of `fields` produced?
  std::vector<std::pair<int64_t, bool>> production_status(std::span<const std::string> fields,
                                                          const std::string& partition_id) const;
  // Both false for a partition without samples.
  bool all_consumed(const std::string& task_name, const std::string& partition_id) const;
  bool all_produced(std::span<const std::string> fields, const std::string& partition_id) const;
  std::vector<std::string> partition_list() const;

  // Key-value API: a key names one sample of a partition. Unknown keys get
  // new samples (one put call); known keys return their sample. A key's tag
  // is its sample's custom_meta: tags (empty, or one object or null per key)
  // are merged into it key by key; null leaves it as it is.
  BatchMeta kv_resolve(const std::string& partition_id, std::span<const std::string> keys,
                       std::span<const nlohmann::json> tags);
  // Known keys only: a missing key throws kNotFound naming it.
  BatchMeta kv_lookup(const std::string& partition_id, std::span<const std::string> keys) const;
  // Every key of the partition (or of every partition) with its tag.
  std::vector<std::pair<std::string, nlohmann::json>> kv_list(const std::string* partition_id) const;
  // A missing key throws kNotFound naming it; nothing is cleared then.
  std::vector<int64_t> kv_clear(const std::string& partition_id, std::span<const std::string> keys);

  // Checkpoint of everything above, including the sampler's state. Atomic on
  // disk; load throws and leaves the running state unchanged on a missing or
  // corrupt file.
  void save(const std::string& path) const;
  void load(const std::string& path);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace seqflow
