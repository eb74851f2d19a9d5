// seqflow.client: the client for Python, embedded or remote (Client.remote).
// Metadata crosses as the bound seqflow::BatchMeta (batch_meta_bindings.cc);
// data crosses as Columns in and as views out (see tensor_conversion.h). Every call into the controller or the storage
// releases the GIL, so a blocking fetch never stalls other Python threads and samplers written in Python can take the
// GIL.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cmath>
#include <map>
#include <optional>

#include "bindings/arrays.h"
#include "bindings/batch_meta_conversion.h"
#include "bindings/gil.h"
#include "bindings/json_conversion.h"
#include "bindings/msgpack_conversion.h"
#include "bindings/samplers.h"
#include "bindings/storage_stats.h"
#include "bindings/submodules.h"
#include "bindings/tensor_conversion.h"
#include "bindings/timing_records.h"
#include "seqflow/client.h"
#include "seqflow/error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

using BoolArray = nb::ndarray<nb::numpy, bool>;

// Flags (0 or 1) as a numpy bool array of `shape`, owning them.
BoolArray bool_array(std::vector<uint8_t>&& flags, std::initializer_list<size_t> shape) {
  auto* owned = new std::vector<uint8_t>(std::move(flags));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  return BoolArray(reinterpret_cast<bool*>(owned->data()), shape, owner);
}

// kv_list's {partition_id: {key: tag}}, tags decoded straight from their
// MessagePack (one decoder: verl's tag keys become str objects once).
nb::dict listing_to_python(const std::vector<PartitionKeys>& listed) {
  MsgpackDecoder decoder;
  nb::dict out;
  for (const PartitionKeys& partition : listed) {
    // Sized once: a growing dict of 100k keys rehashes itself ~14 times.
    nb::object keys = nb::steal(_PyDict_NewPresized(static_cast<Py_ssize_t>(partition.size())));
    if (!keys.is_valid()) throw nb::python_error();
    for (size_t i = 0; i < partition.size(); ++i) {
      const std::string_view name = partition.key(i);
      std::string error;
      nb::object tag = decoder.decode(partition.encoded_tag(i), error);
      if (!tag.is_valid()) throw_invalid("tag of key '" + std::string(name) + "' " + error);
      nb::object key = nb::steal(PyUnicode_DecodeUTF8(name.data(), static_cast<Py_ssize_t>(name.size()), "strict"));
      if (!key.is_valid()) throw nb::python_error();
      if (PyDict_SetItem(keys.ptr(), key.ptr(), tag.ptr()) != 0) throw nb::python_error();
    }
    out[nb::str(partition.partition_id().data(), partition.partition_id().size())] = keys;
  }
  return out;
}

std::vector<std::string> strings(nb::handle values) {
  std::vector<std::string> out;
  for (nb::handle v : values) out.push_back(nb::cast<std::string>(v));
  return out;
}

// (global indexes, flags), or (None, None) for a partition that does not exist.
nb::tuple status_to_python(std::optional<std::vector<std::pair<int64_t, bool>>>&& status) {
  if (!status) return nb::make_tuple(nb::none(), nb::none());
  std::vector<int64_t> indexes;
  std::vector<uint8_t> flags;
  indexes.reserve(status->size());
  flags.reserve(status->size());
  for (const auto& [index, flag] : *status) {
    indexes.push_back(index);
    flags.push_back(flag ? 1 : 0);
  }
  const size_t n = indexes.size();
  return nb::make_tuple(to_numpy(std::move(indexes)), bool_array(std::move(flags), {n}));
}

// (global indexes, flags per sample and field), or (None, None).
nb::tuple production_to_python(std::optional<ProductionStatus>&& status) {
  if (!status) return nb::make_tuple(nb::none(), nb::none());
  const size_t n = status->global_indexes.size();
  return nb::make_tuple(to_numpy(std::move(status->global_indexes)),
                        bool_array(std::move(status->produced), {n, status->field_count}));
}

// The client and the polling default its requests inherit.
struct PyClient {
  std::shared_ptr<Client> client;
  bool polling_mode = false;
};

std::chrono::milliseconds milliseconds_of(double seconds, const char* parameter) {
  // At most ~31 years (Python's _checks.MAX_SECONDS): a deadline of now plus
  // more would overflow int64 nanoseconds.
  constexpr double kMaxSeconds = 1e9;
  if (!std::isfinite(seconds) || seconds < 0 || seconds > kMaxSeconds) {
    throw_invalid(std::string(parameter) + " must be a finite number of seconds >= 0 and <= 1e9, got " +
                  std::to_string(seconds));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

// Keeps `client` for good: destroying it would wait for threads that will
// never finish (a parent's after fork, parked ones at interpreter exit).
void leak(std::shared_ptr<Client>&& client) { new std::shared_ptr<Client>(std::move(client)); }

// A remote client whose last reference goes without the GIL: its teardown
// waits for ZeroMQ's I/O threads, which may be releasing a borrowed array
// (a frame of a failed put) and need the GIL for it. While the interpreter
// finalizes, such a thread may be parked for good (see gil.h), so the client
// is left to the process's exit instead.
std::shared_ptr<Client> torn_down_without_gil(std::shared_ptr<Client> client) {
  Client* raw = client.get();
  return std::shared_ptr<Client>(raw, [inner = std::move(client)](Client*) mutable {
    if (python_finalizing()) return leak(std::move(inner));
    std::optional<GilReleased> release;
    if (PyGILState_Check()) release.emplace();
    inner.reset();
  });
}

BatchMeta fetch_meta(PyClient& self, MetaRequest&& request) {
  GilReleased release;
  return self.client->get_meta(request);
}

}  // namespace

void bind_client(nb::module_ m) {
  bind_samplers(m);

  nb::class_<Column>(m, "Column", "One field's values for a batch, in a buffer the storage will own.")
      .def_prop_ro("field", [](const Column& c) { return c.field; })
      .def_prop_ro("sample_count", &Column::sample_count)
      .def_prop_ro("nbytes", [](const Column& c) { return c.buffer ? c.buffer->size : size_t{0}; })
      .def_prop_ro("is_object", [](const Column& c) { return c.is_object; });
  m.def("dense_column", &dense_column, "field"_a, "array"_a, "borrow"_a = false);
  m.def("jagged_column", &jagged_column, "field"_a, "values"_a, "offsets"_a, "borrow"_a = false);
  m.def("ragged_column", &ragged_column, "field"_a, "arrays"_a);
  m.def("object_column", &object_column, "field"_a, "items"_a, "allow_pickle"_a);
  m.def("decode_custom_meta", &decode_custom_meta, "encoded"_a, "offsets"_a,
        "One dict per sample from a batch's encoded custom_meta (MessagePack bytes and offsets).");

  nb::class_<TaskWorkload>(m, "TaskWorkload",
                           "A task's measured workload model: the fit of the micro-batch timings its ranks reported "
                           "(report_timing), or the tokens prior until enough came.")
      .def_ro("task_name", &TaskWorkload::task_name)
      .def_ro("workload", &TaskWorkload::workload)
      .def_ro("reports", &TaskWorkload::reports)
      .def_ro("fitted", &TaskWorkload::fitted)
      .def("__repr__", [](const TaskWorkload& model) {
        return "TaskWorkload(task_name='" + model.task_name + "', workload=" + model.workload.name() +
               ", reports=" + std::to_string(model.reports) + ", fitted=" + (model.fitted ? "True" : "False") + ")";
      });
  nb::class_<PyClient>(m, "Client", "Embedded (controller and storage in this process) or remote (services).")
      .def(
          "__init__",
          [](PyClient* self, std::shared_ptr<Sampler> sampler, bool polling_mode, uint64_t max_bytes,
             uint64_t max_samples) {
            // polling_mode is this client's default (PyClient), as in remote mode: a
            // request that says polling=False waits.
            ControllerOptions controller_options{std::move(sampler), false};
            StorageOptions storage_options{max_bytes, max_samples};
            new (self) PyClient{make_embedded_client(std::move(controller_options), storage_options), polling_mode};
          },
          "sampler"_a.none(), "polling_mode"_a, "max_bytes"_a, "max_samples"_a)
      .def_static(
          "remote",
          [](const std::string& controller_endpoint, double timeout_seconds, const std::string& server_public_key,
             const std::string& client_public_key, const std::string& client_secret_key, bool polling_mode,
             bool local_copy, int64_t busy_poll_us) {
            RemoteOptions options;
            options.controller_endpoint = controller_endpoint;
            options.timeout = milliseconds_of(timeout_seconds, "timeout_seconds");
            options.server_public_key = server_public_key;
            options.client_public_key = client_public_key;
            options.client_secret_key = client_secret_key;
            options.local_copy = local_copy;
            options.busy_poll = std::chrono::microseconds(busy_poll_us);
            GilReleased release;
            return PyClient{torn_down_without_gil(make_remote_client(options)), polling_mode};
          },
          "controller_endpoint"_a, "timeout_seconds"_a, "server_public_key"_a, "client_public_key"_a,
          "client_secret_key"_a, "polling_mode"_a, "local_copy"_a, "busy_poll_us"_a,
          "A client of the controller service at controller_endpoint; CURVE when the keys (Z85) are given.")
      .def(
          "abandon",
          [](PyClient& self) {
            // After fork, the sockets and I/O threads of a remote client belong
            // to the parent: destroying them here would tear down the parent's
            // connections, so the child leaks its copy instead.
            leak(std::move(self.client));
          },
          "Forget this client without destroying it (in a child process after fork).")
      .def_prop_ro("polling_mode", [](const PyClient& self) { return self.polling_mode; })
      .def(
          "put_new",
          [](PyClient& self, const std::string& partition_id, const std::vector<Column>& columns,
             nb::handle custom_meta) {
            std::vector<Value> metas = custom_meta_from_python(custom_meta);
            BatchMeta meta;
            {
              GilReleased release;
              meta = self.client->put_new(partition_id, columns, metas);
            }
            return meta;
          },
          "partition_id"_a, "columns"_a, "custom_meta"_a.none())
      .def(
          "put_existing",
          [](PyClient& self, const BatchMeta& target, const std::vector<Column>& columns, nb::handle custom_meta) {
            std::vector<Value> metas = custom_meta_from_python(custom_meta);
            BatchMeta result;
            {
              GilReleased release;
              result = self.client->put_existing(target, columns, metas);
            }
            return result;
          },
          "meta"_a, "columns"_a, "custom_meta"_a.none())
      .def(
          "get_meta",
          [](PyClient& self, nb::handle fields, int64_t batch_size, const std::string& partition_id,
             const std::string& mode, const std::string& task_name, std::optional<int64_t> dp_rank, int64_t batch_index,
             std::optional<nb::dict> sampling_extra, std::optional<bool> polling, std::optional<double> timeout) {
            MetaRequest request;
            request.fields = strings(fields);
            request.batch_size = batch_size;
            request.partition_id = partition_id;
            request.mode = parse_meta_mode(mode);
            request.task_name = task_name;
            request.sampling = {dp_rank.value_or(0), batch_index, dp_rank.has_value()};
            if (sampling_extra) {
              request.sampling.extra = Value::object();
              for (auto [key, value] : *sampling_extra) {
                const std::string name = nb::cast<std::string>(key);
                request.sampling.extra[name] = to_value(value, "sampling_config['" + name + "']");
              }
            }
            request.polling = polling.value_or(self.polling_mode);
            if (timeout) request.timeout = milliseconds_of(*timeout, "timeout");
            return fetch_meta(self, std::move(request));
          },
          "fields"_a, "batch_size"_a, "partition_id"_a, "mode"_a, "task_name"_a, "dp_rank"_a.none(), "batch_index"_a,
          "sampling_extra"_a.none(), "polling"_a.none(), "timeout"_a.none())
      .def(
          "get_data",
          [](PyClient& self, const BatchMeta& meta, nb::handle fields, nb::handle nested, bool fresh, bool writable,
             bool allow_pickle) {
            const std::vector<std::string> names = strings(fields);
            std::vector<std::vector<SampleView>> per_field(names.size());
            {
              GilReleased release;
              std::vector<std::vector<SampleView>> rows = self.client->get_data(meta, names);
              for (auto& column : per_field) column.reserve(rows.size());
              for (auto& row : rows) {
                for (size_t f = 0; f < names.size(); ++f) per_field[f].push_back(std::move(row[f]));
              }
            }
            nb::dict out;
            for (size_t f = 0; f < names.size(); ++f) {
              const FieldOutput output{nb::cast<bool>(nested[nb::int_(f)]), fresh, writable, allow_pickle};
              if (!per_field[f].empty()) out[names[f].c_str()] = field_to_python(per_field[f], names[f], output);
            }
            return out;
          },
          "meta"_a, "fields"_a, "nested"_a, "fresh"_a, "writable"_a, "allow_pickle"_a)
      .def(
          "set_custom_meta",
          [](PyClient& self, const BatchMeta& meta, nb::handle custom_meta) {
            const std::vector<Value> metas = custom_meta_from_python(custom_meta);
            const std::span<const uint64_t> known = meta.generations;
            const size_t n = meta.size();
            if (metas.size() != n) {
              throw_invalid("set_custom_meta: " + std::to_string(n) + " samples and " + std::to_string(metas.size()) +
                            " custom_meta entries; give one per sample");
            }
            struct Group {
              std::vector<int64_t> indexes;
              std::vector<uint64_t> generations;
              std::vector<Value> metas;
            };
            std::map<std::string, Group> groups;
            for (size_t i = 0; i < n; ++i) {
              Group& group = groups[meta.partition_ids[i]];
              group.indexes.push_back(meta.global_indexes[i]);
              if (!known.empty()) group.generations.push_back(known[i]);
              group.metas.push_back(metas[i]);
            }
            GilReleased release;
            for (const auto& [partition_id, group] : groups) {
              self.client->control().set_custom_meta(partition_id, group.indexes, group.generations, group.metas);
            }
          },
          "meta"_a, "custom_meta"_a)
      .def(
          "clear_samples",
          [](PyClient& self, const BatchMeta& meta) {
            GilReleased release;
            for (const BatchMeta& part : meta.chunk_by_partition()) {
              self.client->clear_samples(part.partition_ids[0], part.global_indexes, part.generations);
            }
          },
          "meta"_a)
      .def(
          "clear_partition",
          [](PyClient& self, const std::string& partition_id) {
            GilReleased release;
            self.client->clear_partition(partition_id);
          },
          "partition_id"_a)
      .def(
          "reset_consumption",
          [](PyClient& self, const std::string& partition_id, std::optional<std::string> task_name) {
            GilReleased release;
            self.client->control().reset_consumption(partition_id, task_name ? &*task_name : nullptr);
          },
          "partition_id"_a, "task_name"_a.none())
      .def(
          "consumption_status",
          [](PyClient& self, const std::string& task_name, const std::string& partition_id) {
            std::optional<std::vector<std::pair<int64_t, bool>>> status;
            {
              GilReleased release;
              status = self.client->control().consumption_status(task_name, partition_id);
            }
            return status_to_python(std::move(status));
          },
          "task_name"_a, "partition_id"_a)
      .def(
          "production_status",
          [](PyClient& self, nb::handle fields, const std::string& partition_id) {
            const std::vector<std::string> names = strings(fields);
            std::optional<ProductionStatus> status;
            {
              GilReleased release;
              status = self.client->control().production_status(names, partition_id);
            }
            return production_to_python(std::move(status));
          },
          "fields"_a, "partition_id"_a)
      .def(
          "all_consumed",
          [](PyClient& self, const std::string& task_name, const std::string& partition_id) {
            GilReleased release;
            return self.client->control().all_consumed(task_name, partition_id);
          },
          "task_name"_a, "partition_id"_a)
      .def(
          "all_produced",
          [](PyClient& self, nb::handle fields, const std::string& partition_id) {
            const std::vector<std::string> names = strings(fields);
            GilReleased release;
            return self.client->control().all_produced(names, partition_id);
          },
          "fields"_a, "partition_id"_a)
      .def(
          "report_timing",
          [](PyClient& self, const std::string& task_name, const std::vector<Int64Input>& lengths,
             const std::vector<double>& seconds) {
            const std::vector<TimingRecord> records = timing_records(lengths, seconds);
            GilReleased release;
            self.client->control().report_timing(task_name, records);
          },
          "task_name"_a, "lengths"_a, "seconds"_a)
      .def(
          "task_workload",
          [](PyClient& self, const std::string& task_name) {
            GilReleased release;
            return self.client->control().task_workload(task_name);
          },
          "task_name"_a)
      .def("partition_list",
           [](PyClient& self) {
             GilReleased release;
             return self.client->control().partition_list();
           })
      .def(
          "kv_put",
          [](PyClient& self, const std::string& partition_id, nb::handle keys, nb::handle tags,
             const std::vector<Column>& columns) {
            const std::vector<std::string> names = strings(keys);
            std::vector<Value> tag_values;
            if (!tags.is_none()) {
              size_t i = 0;
              for (nb::handle tag : tags) tag_values.push_back(to_value(tag, "tags[" + std::to_string(i++) + "]"));
            }
            BatchMeta meta;
            {
              GilReleased release;
              meta = self.client->kv_put(partition_id, names, tag_values, columns);
            }
            return meta;
          },
          "partition_id"_a, "keys"_a, "tags"_a.none(), "columns"_a)
      .def(
          "kv_meta",
          [](PyClient& self, const std::string& partition_id, nb::handle keys) {
            const std::vector<std::string> names = strings(keys);
            BatchMeta meta;
            {
              GilReleased release;
              meta = self.client->kv_meta(partition_id, names);
            }
            return meta;
          },
          "partition_id"_a, "keys"_a)
      .def(
          "kv_find",
          [](PyClient& self, const std::string& partition_id, nb::handle keys) {
            const std::vector<std::string> names = strings(keys);
            BatchMeta meta;
            {
              GilReleased release;
              meta = self.client->control().kv_find(partition_id, names);
            }
            return meta;
          },
          "partition_id"_a, "keys"_a)
      .def(
          "kv_keys",
          [](PyClient& self, const std::string& partition_id, const Int64Input& global_indexes) {
            std::vector<std::string> keys;
            {
              GilReleased release;
              keys = self.client->control().kv_keys(partition_id, as_span(global_indexes));
            }
            return keys;
          },
          "partition_id"_a, "global_indexes"_a)
      .def(
          "kv_list",
          [](PyClient& self, std::optional<std::string> partition_id) {
            std::vector<PartitionKeys> listed;
            {
              GilReleased release;
              listed = self.client->control().kv_list(partition_id ? &*partition_id : nullptr);
            }
            return listing_to_python(listed);
          },
          "partition_id"_a.none())
      .def(
          "kv_clear",
          [](PyClient& self, const std::string& partition_id, nb::handle keys) {
            const std::vector<std::string> names = strings(keys);
            GilReleased release;
            self.client->kv_clear(partition_id, names);
          },
          "partition_id"_a, "keys"_a)
      .def(
          "save_checkpoint",
          [](PyClient& self, const std::string& directory, nb::handle metadata) {
            const Value user_metadata = metadata.is_none() ? Value::object() : to_value(metadata, "metadata");
            GilReleased release;
            self.client->save_checkpoint(directory, user_metadata);
          },
          "directory"_a, "metadata"_a.none())
      .def(
          "load_checkpoint",
          [](PyClient& self, const std::string& directory) {
            Value user_metadata;
            {
              GilReleased release;
              user_metadata = self.client->load_checkpoint(directory);
            }
            return from_value(user_metadata);
          },
          "directory"_a)
      .def("storage_stats", [](PyClient& self) {
        StorageStats stats;
        {
          GilReleased release;
          stats = self.client->storage_stats();
        }
        return stats_to_python(stats);
      });
}

}  // namespace seqflow::bindings
