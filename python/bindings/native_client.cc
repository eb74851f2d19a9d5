// _seqflow.client.NativeClient: the engine's client (seqflow/client.h) with
// typed calls, one per seqflow.Client call (python/seqflow/client.py checks
// the arguments and converts the data first). Each call releases the GIL, so
// a blocking fetch never stalls other Python threads and samplers written in
// Python can take it.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cmath>
#include <map>
#include <optional>

#include "bindings/arguments.h"
#include "bindings/arrays.h"
#include "bindings/batch_meta_conversion.h"
#include "bindings/gil.h"
#include "bindings/json_conversion.h"
#include "bindings/msgpack_conversion.h"
#include "bindings/storage_stats.h"
#include "bindings/tensor_conversion.h"
#include "bindings/timing_records.h"
#include "seqflow/client.h"
#include "seqflow/error.h"
#include "seqflow/security.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

using BoolArray = nb::ndarray<nb::numpy, bool>;
using Int64Array = nb::ndarray<nb::numpy, int64_t, nb::ndim<1>>;
using IndexFlags = std::pair<std::optional<nb::ndarray<nb::numpy, int64_t, nb::ndim<1>>>, std::optional<BoolArray>>;

// f() without the GIL (an engine call); its result is made before the GIL comes back.
template <typename Function>
auto without_gil(Function&& function) {
  GilReleased release;
  return function();
}

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

// Keeps `client` for good: destroying it would wait for threads that will
// never finish (a parent's after fork, parked ones at interpreter exit).
void leak(std::shared_ptr<Client>&& client) { new std::shared_ptr<Client>(std::move(client)); }

// A client whose last reference goes without the GIL: a remote client's
// teardown waits for ZeroMQ's I/O threads, which may be releasing a borrowed
// array (a frame of a failed put) and need the GIL for it. While the
// interpreter finalizes, such a thread may be parked for good (see gil.h), so
// the client is left to the process's exit instead.
std::shared_ptr<Client> torn_down_without_gil(std::shared_ptr<Client> client) {
  Client* raw = client.get();
  return std::shared_ptr<Client>(raw, [inner = std::move(client)](Client*) mutable {
    if (python_finalizing()) return leak(std::move(inner));
    const std::optional<GilReleased> release = released_if_held();
    inner.reset();
  });
}

// Flags (0 or 1) as a numpy bool array of `shape`, owning them.
BoolArray bool_array(std::vector<uint8_t>&& flags, std::initializer_list<size_t> shape) {
  auto* owned = new std::vector<uint8_t>(std::move(flags));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  return BoolArray(reinterpret_cast<bool*>(owned->data()), shape, owner);
}

std::vector<Value> tags_of(const std::optional<nb::list>& tags) {
  std::vector<Value> values;
  if (!tags) return values;
  size_t i = 0;
  for (nb::handle tag : *tags) values.push_back(to_value(tag, "tags[" + std::to_string(i++) + "]"));
  return values;
}

std::vector<Value> custom_meta_of(const std::optional<nb::list>& custom_meta) {
  return custom_meta ? custom_meta_from_python(*custom_meta) : std::vector<Value>{};
}

SamplingConfig sampling_of(std::optional<int64_t> dp_rank, int64_t batch_index,
                           const std::optional<nb::dict>& sampler_args) {
  SamplingConfig sampling;
  if (dp_rank) {
    sampling.dp_rank = *dp_rank;
    sampling.dp_rank_given = true;
  }
  sampling.batch_index = batch_index;
  if (sampler_args && sampler_args->size()) {
    sampling.extra = Value::object();
    for (auto [key, value] : *sampler_args) {
      const std::string name = nb::cast<std::string>(key);
      sampling.extra[name] = to_value(value, "sampling_config['" + name + "']");
    }
  }
  return sampling;
}

// The engine's client; null once closed (calls then raise RuntimeError).
class NativeClient {
 public:
  explicit NativeClient(std::shared_ptr<Client> client) : client_(torn_down_without_gil(std::move(client))) {}

  static NativeClient embedded(std::shared_ptr<Sampler> sampler, const StorageOptions& storage,
                               int64_t timing_alignment) {
    // polling_mode is the Python client's default, as in remote mode: a request that says polling=False waits.
    ControllerOptions controller{std::move(sampler), false, timing_alignment};
    return NativeClient(make_embedded_client(std::move(controller), storage));
  }

  static NativeClient connect(const std::string& address, double timeout,
                              const std::optional<std::string>& server_public_key_file,
                              const std::optional<std::string>& client_key_file, bool local_copy,
                              int64_t busy_poll_us) {
    RemoteOptions options;
    options.controller_endpoint = address;
    options.timeout = milliseconds(timeout);
    if (server_public_key_file.has_value() != client_key_file.has_value()) {
      throw_invalid("CURVE needs both server_public_key_file and client_key_file");  // never plaintext by mistake
    }
    if (server_public_key_file) {
      const CurveKeyPair server = read_key_file(*server_public_key_file);
      const CurveKeyPair own = read_key_file(*client_key_file);
      if (own.secret_key.empty()) {
        throw_invalid("client_key_file '" + *client_key_file +
                      "' holds no secret key; give the .key file of this client's pair (seqflow keygen), not a .pub "
                      "file");
      }
      options.server_public_key = server.public_key;
      options.client_public_key = own.public_key;
      options.client_secret_key = own.secret_key;
    }
    options.local_copy = local_copy;
    options.busy_poll = std::chrono::microseconds(busy_poll_us);
    return NativeClient(without_gil([&] { return make_remote_client(options); }));
  }

  // The client for one call, held for its duration (close() may run meanwhile on another thread).
  std::shared_ptr<Client> connected() const {
    if (!client_) throw std::runtime_error("this seqflow client is closed");
    return client_;
  }

  void close() { client_.reset(); }

  // After fork in a child: the sockets and I/O threads belong to the parent;
  // destroying them here would tear down the parent's connections.
  void abandon() {
    if (client_) leak(std::move(client_));
  }

 private:
  std::shared_ptr<Client> client_;
};

BatchMeta put_new(const NativeClient& self, const std::string& partition, const std::vector<FieldInput>& fields,
                  const std::optional<nb::list>& custom_meta) {
  const std::vector<Column> columns = columns_of(fields);
  const std::vector<Value> metas = custom_meta_of(custom_meta);
  std::shared_ptr<Client> client = self.connected();
  return without_gil([&] { return client->put_new(partition, columns, metas); });
}

// More fields of `meta`'s samples (the engine's view of seqflow.BatchMeta).
BatchMeta put_existing(const NativeClient& self, const BatchMeta& meta, const std::vector<FieldInput>& fields,
                       const std::optional<nb::list>& custom_meta) {
  const std::vector<Column> columns = columns_of(fields);
  const std::vector<Value> metas = custom_meta_of(custom_meta);
  std::shared_ptr<Client> client = self.connected();
  return without_gil([&] { return client->put_existing(meta, columns, metas); });
}

BatchMeta get_meta(const NativeClient& self, const std::string& partition, const std::vector<std::string>& fields,
                   int64_t batch_size, const std::string& mode, const std::string& task_name,
                   std::optional<int64_t> dp_rank, int64_t batch_index, const std::optional<nb::dict>& sampler_args,
                   bool polling, double timeout, double lease) {
  MetaRequest request;
  request.fields = fields;
  request.batch_size = batch_size;
  request.partition_id = partition;
  request.mode = parse_meta_mode(mode);
  request.task_name = task_name;
  request.sampling = sampling_of(dp_rank, batch_index, sampler_args);
  request.polling = polling;
  request.timeout = milliseconds(timeout);
  request.lease = milliseconds(lease);
  std::shared_ptr<Client> client = self.connected();
  return without_gil([&] { return client->get_meta(request); });
}

// get_data's fields by name (see fields_out in tensor_conversion.h; a field
// no sample holds comes back empty in its `field_schema` entry's shape); a
// batch of no samples asks no one (`client` may be None then).
nb::dict get_data(const NativeClient* client_or_none, const BatchMeta& meta, const nb::dict& field_schema,
                  const std::vector<std::string>& fields, const std::vector<bool>& nested, const std::string& fmt,
                  const std::string& layout, bool fresh, bool writable, bool allow_pickle,
                  const nb::callable& container) {
  std::vector<std::vector<SampleView>> per_field(fields.size());
  if (meta.size()) {
    if (client_or_none == nullptr) {
      throw_invalid("get_data of " + std::to_string(meta.size()) + " samples needs a client");
    }
    std::shared_ptr<Client> client = client_or_none->connected();
    GilReleased release;
    std::vector<std::vector<SampleView>> rows = client->get_data(meta, fields);
    for (auto& column : per_field) column.reserve(rows.size());
    for (auto& row : rows) {
      for (size_t f = 0; f < fields.size(); ++f) per_field[f].push_back(std::move(row[f]));
    }
  }
  nb::dict native;
  for (size_t f = 0; f < fields.size(); ++f) {
    const FieldOutput output{nested.at(f), fresh, writable, allow_pickle};
    if (!per_field[f].empty()) native[fields[f].c_str()] = field_to_python(per_field[f], fields[f], output);
  }
  return fields_out(fields, native, field_schema, fmt, layout, container);
}

void set_custom_meta(const NativeClient& self, const BatchMeta& meta, const nb::list& custom_meta) {
  const size_t n = meta.size();
  const std::vector<Value> metas = custom_meta_from_python(custom_meta);
  if (metas.size() != n) {
    throw_invalid("set_custom_meta: " + std::to_string(n) + " samples and " + std::to_string(metas.size()) +
                  " custom_meta entries; give one per sample");
  }
  struct Group {
    std::vector<int64_t> indexes;
    std::vector<uint64_t> generations;
    std::vector<Value> metas;
  };
  const std::span<const uint64_t> known = meta.generations;
  std::map<std::string, Group> groups;
  for (size_t i = 0; i < n; ++i) {
    Group& group = groups[meta.partition_ids[i]];
    group.indexes.push_back(meta.global_indexes[i]);
    if (!known.empty()) group.generations.push_back(known[i]);
    group.metas.push_back(metas[i]);
  }
  std::shared_ptr<Client> client = self.connected();
  GilReleased release;
  for (const auto& [partition_id, group] : groups) {
    client->control().set_custom_meta(partition_id, group.indexes, group.generations, group.metas);
  }
}

void clear_samples(const NativeClient& self, const BatchMeta& meta) {
  std::shared_ptr<Client> client = self.connected();
  GilReleased release;
  for (const BatchMeta& part : meta.chunk_by_partition()) {
    client->clear_samples(part.partition_ids[0], part.global_indexes, part.generations);
  }
}

IndexFlags consumption_status(const NativeClient& self, const std::string& task, const std::string& partition) {
  std::shared_ptr<Client> client = self.connected();
  auto status = without_gil([&] { return client->control().consumption_status(task, partition); });
  if (!status) return {};
  std::vector<int64_t> indexes;
  std::vector<uint8_t> flags;
  indexes.reserve(status->size());
  flags.reserve(status->size());
  for (const auto& [index, flag] : *status) {
    indexes.push_back(index);
    flags.push_back(flag ? 1 : 0);
  }
  const size_t n = indexes.size();
  return {to_numpy(std::move(indexes)), bool_array(std::move(flags), {n})};
}

// (start, finish): two int64 arrays, one entry per sample asked.
std::pair<Int64Array, Int64Array> versions_to_numpy(PolicyVersions versions) {
  return {to_numpy(std::move(versions.start)), to_numpy(std::move(versions.finish))};
}

IndexFlags production_status(const NativeClient& self, const std::vector<std::string>& fields,
                             const std::string& partition) {
  std::shared_ptr<Client> client = self.connected();
  std::optional<ProductionStatus> status =
      without_gil([&] { return client->control().production_status(fields, partition); });
  if (!status) return {};
  const size_t n = status->global_indexes.size();
  return {to_numpy(std::move(status->global_indexes)),
          bool_array(std::move(status->produced), {n, status->field_count})};
}

nb::object load_checkpoint(const NativeClient& self, const std::string& path) {
  std::shared_ptr<Client> client = self.connected();
  Value user_metadata;
  try {
    user_metadata = without_gil([&] { return client->load_checkpoint(path); });
  } catch (const Error& error) {
    if (error.code() != ErrorCode::kNotFound) throw;
    throw MissingFile(error.what()[0] ? error.what() : "no checkpoint", path);
  }
  return from_value(user_metadata);
}

}  // namespace

void bind_native_client(nb::module_ m) {
  nb::class_<NativeClient> cls(m, "NativeClient",
                               "The engine's client, embedded or remote; seqflow.Client checks the arguments and "
                               "converts the data before each call.");
  cls.def_static("embedded", &NativeClient::embedded, "sampler"_a.none(), "storage"_a, "timing_alignment"_a,
                 "Controller and storage in this process.")
      .def_static("connect", &NativeClient::connect, "address"_a, "timeout"_a, "server_public_key_file"_a.none(),
                  "client_key_file"_a.none(), "local_copy"_a, "busy_poll_us"_a,
                  "A client of the controller service at `address`; waits up to `timeout` seconds for it and its "
                  "storage units.")
      .def("close", &NativeClient::close, "Releases the controller and the storage (or the connections).")
      .def("abandon", &NativeClient::abandon, "After fork, in the child: leaves the parent's sockets alone.");
  cls.def("put_new", &put_new, "partition_id"_a, "fields"_a, "custom_meta"_a.none());
  cls.def("put_existing", &put_existing, "meta"_a, "fields"_a, "custom_meta"_a.none());
  cls.def("get_meta", &get_meta, "partition_id"_a, "fields"_a, "batch_size"_a, "mode"_a, "task_name"_a,
          "dp_rank"_a.none(), "batch_index"_a, "sampler_args"_a.none(), "polling"_a, "timeout"_a, "lease"_a);
  m.def("get_data", &get_data, "client"_a.none(), "meta"_a, "field_schema"_a, "fields"_a, "nested"_a, "format"_a,
        "layout"_a, "fresh"_a, "writable"_a, "allow_pickle"_a, "container"_a,
        "The fields of `meta`'s samples as seqflow.Client.get_data returns them (before a TensorDict wraps them).");
  cls.def("set_custom_meta", &set_custom_meta, "meta"_a, "custom_meta"_a);
  cls.def("clear_samples", &clear_samples, "meta"_a);
  cls.def(
      "clear_partition",
      [](const NativeClient& self, const std::string& partition) {
        std::shared_ptr<Client> client = self.connected();
        without_gil([&] { client->clear_partition(partition); });
      },
      "partition_id"_a);
  cls.def(
      "reset_consumption",
      [](const NativeClient& self, const std::string& partition, const std::optional<std::string>& task) {
        std::shared_ptr<Client> client = self.connected();
        without_gil([&] { client->control().reset_consumption(partition, task ? &*task : nullptr); });
      },
      "partition_id"_a, "task_name"_a.none());
  cls.def(
      "end_leases",
      [](const NativeClient& self, const BatchMeta& meta, const std::string& task, bool release) {
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return end_leases(client->control(), meta, task, release); });
      },
      "metadata"_a, "task_name"_a, "release"_a);
  cls.def("consumption_status", &consumption_status, "task_name"_a, "partition_id"_a);
  cls.def(
      "all_consumed",
      [](const NativeClient& self, const std::string& task, const std::string& partition) {
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->control().all_consumed(task, partition); });
      },
      "task_name"_a, "partition_id"_a);
  cls.def("production_status", &production_status, "fields"_a, "partition_id"_a);
  cls.def(
      "all_produced",
      [](const NativeClient& self, const std::vector<std::string>& fields, const std::string& partition) {
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->control().all_produced(fields, partition); });
      },
      "fields"_a, "partition_id"_a);
  cls.def("partition_list", [](const NativeClient& self) {
    std::shared_ptr<Client> client = self.connected();
    return without_gil([&] { return client->control().partition_list(); });
  });
  cls.def("storage_stats", [](const NativeClient& self) {
    std::shared_ptr<Client> client = self.connected();
    return stats_to_python(without_gil([&] { return client->storage_stats(); }));
  });
  cls.def("capacity_stats", [](const NativeClient& self) -> std::optional<nb::dict> {
    std::shared_ptr<Client> client = self.connected();
    const std::optional<CapacityStats> stats = client->capacity_stats();
    if (!stats) return std::nullopt;
    return capacity_stats_to_python(*stats);
  });
  cls.def(
      "report_timings",
      [](const NativeClient& self, const std::string& task, const std::vector<Int64Input>& lengths,
         const std::vector<double>& seconds) {
        const std::vector<TimingRecord> timings = timing_records(lengths, seconds);
        std::shared_ptr<Client> client = self.connected();
        without_gil([&] { client->control().report_timing(task, timings); });
      },
      "task_name"_a, "lengths"_a, "seconds"_a);
  cls.def(
      "task_workload",
      [](const NativeClient& self, const std::string& task) {
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->control().task_workload(task); });
      },
      "task_name"_a);
  cls.def(
      "save_checkpoint",
      [](const NativeClient& self, const std::string& path, const nb::dict& metadata) {
        const Value user_metadata = to_value(metadata, "metadata");
        std::shared_ptr<Client> client = self.connected();
        without_gil([&] { client->save_checkpoint(path, user_metadata); });
      },
      "directory"_a, "metadata"_a);
  cls.def("load_checkpoint", &load_checkpoint, "directory"_a);
  cls.def(
      "kv_put",
      [](const NativeClient& self, const std::string& partition, const std::vector<std::string>& keys,
         const std::optional<nb::list>& tags, const std::vector<FieldInput>& fields) {
        const std::vector<Column> columns = columns_of(fields);
        const std::vector<Value> tag_values = tags_of(tags);
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->kv_put(partition, keys, tag_values, columns); });
      },
      "partition_id"_a, "keys"_a, "tags"_a.none(), "fields"_a,
      "Samples under `keys` (made when new), their tags merged and their fields written.");
  cls.def(
      "kv_meta",
      [](const NativeClient& self, const std::string& partition, const std::vector<std::string>& keys, bool skip) {
        std::shared_ptr<Client> client = self.connected();
        return without_gil(
            [&] { return skip ? client->control().kv_find(partition, keys) : client->kv_meta(partition, keys); });
      },
      "partition_id"_a, "keys"_a, "skip_missing"_a);
  cls.def(
      "kv_keys",
      [](const NativeClient& self, const std::string& partition, const Int64Input& indexes) {
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->control().kv_keys(partition, as_span(indexes)); });
      },
      "partition_id"_a, "global_indexes"_a);
  cls.def(
      "set_policy_version",
      [](const NativeClient& self, int64_t version) {
        std::shared_ptr<Client> client = self.connected();
        without_gil([&] { client->control().set_policy_version(version); });
      },
      "version"_a);
  cls.def("policy_version", [](const NativeClient& self) {
    std::shared_ptr<Client> client = self.connected();
    return without_gil([&] { return client->control().policy_version(); });
  });
  cls.def(
      "policy_versions",
      [](const NativeClient& self, const std::string& partition, const Int64Input& indexes) {
        std::shared_ptr<Client> client = self.connected();
        return versions_to_numpy(
            without_gil([&] { return client->control().policy_versions(partition, as_span(indexes)); }));
      },
      "partition_id"_a, "global_indexes"_a);
  cls.def(
      "kv_policy_versions",
      [](const NativeClient& self, const std::string& partition, const std::vector<std::string>& keys) {
        std::shared_ptr<Client> client = self.connected();
        return versions_to_numpy(without_gil([&] { return client->control().kv_policy_versions(partition, keys); }));
      },
      "partition_id"_a, "keys"_a);
  cls.def(
      "kv_list",
      [](const NativeClient& self, const std::optional<std::string>& partition) {
        std::shared_ptr<Client> client = self.connected();
        return listing_to_python(
            without_gil([&] { return client->control().kv_list(partition ? &*partition : nullptr); }));
      },
      "partition_id"_a.none());
  cls.def(
      "kv_clear",
      [](const NativeClient& self, const std::string& partition, const std::vector<std::string>& keys) {
        std::shared_ptr<Client> client = self.connected();
        without_gil([&] { client->kv_clear(partition, keys); });
      },
      "partition_id"_a, "keys"_a);
  cls.def(
      "replay_pass",
      [](const NativeClient& self, const std::string& partition, int64_t global_steps, int64_t batch_size,
         const std::string& step, const std::string& mode, std::optional<int64_t> max_off_policy_threshold,
         const std::string& strategy, std::optional<std::string> group_filter_tag, bool evict,
         bool refill_failed_groups, int64_t max_inflight_prompts, int64_t gen_batch_size,
         std::optional<std::string> group_filter_metric,
         std::vector<std::pair<std::string, std::vector<double>>> group_values, const ReplayCursor& cursor,
         int64_t wait_ms, uint64_t pass_id, int64_t lease_ms, int64_t balance_ranks, std::string balance_length_tag,
         std::string balance_workload, std::optional<int64_t> max_staleness_versions, bool member_status) {
        ReplayRequest request{
            partition,
            global_steps,
            batch_size,
            parse_replay_step(step),
            {parse_replay_mode(mode), max_off_policy_threshold, max_staleness_versions,
             parse_staleness_strategy(strategy), std::move(group_filter_tag), evict, refill_failed_groups,
             max_inflight_prompts, gen_batch_size, std::move(group_filter_metric), balance_ranks,
             std::move(balance_length_tag), std::move(balance_workload), member_status},
            cursor,
            wait_ms,
            std::move(group_values),
            pass_id,
            lease_ms};
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->replay_pass(request); });
      },
      "partition_id"_a, "global_steps"_a, "batch_size"_a, "step"_a, "mode"_a, "max_off_policy_threshold"_a.none(),
      "strategy"_a, "group_filter_tag"_a.none(), "evict"_a, "refill_failed_groups"_a, "max_inflight_prompts"_a,
      "gen_batch_size"_a, "group_filter_metric"_a.none(), "group_values"_a, "cursor"_a, "wait_ms"_a, "pass_id"_a,
      "lease_ms"_a, "balance_ranks"_a, "balance_length_tag"_a, "balance_workload"_a, "max_staleness_versions"_a.none(),
      "member_status"_a);
  cls.def(
      "watch",
      [](const NativeClient& self, const std::string& partition, const std::string& key_prefix,
         const std::string& tag_field, uint64_t cursor, int64_t max_changes, int64_t wait_ms) {
        const WatchRequest request{
            partition, {key_prefix, tag_field}, cursor, max_changes, std::chrono::milliseconds(wait_ms)};
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->control().watch(request); });
      },
      "partition_id"_a, "key_prefix"_a, "tag_field"_a, "cursor"_a, "max_changes"_a, "wait_ms"_a,
      "The partition's changes since `cursor` (0: start watching), waiting up to wait_ms for one.");
  cls.def(
      "ack_replay_pass",
      [](const NativeClient& self, const std::string& partition, uint64_t pass_id) {
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->ack_replay_pass(partition, pass_id); });
      },
      "partition_id"_a, "pass_id"_a);
  cls.def(
      "reissue_inflight_prompts",
      [](const NativeClient& self, const std::string& partition, int64_t global_steps, bool member_status) {
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->reissue_inflight_prompts(partition, global_steps, member_status); });
      },
      "partition_id"_a, "global_steps"_a, "member_status"_a);
}

}  // namespace seqflow::bindings
