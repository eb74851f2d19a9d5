// seqflow.Client's calls on samples, partitions, status, timings and
// checkpoints (the key-value calls: client_kv.cc). Each checks its arguments
// (messages name the parameter and the value), then calls the engine without
// the GIL, so a blocking fetch never stalls other Python threads and samplers
// written in Python can take the GIL.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cerrno>
#include <map>
#include <optional>

#include "bindings/arrays.h"
#include "bindings/batch_meta_conversion.h"
#include "bindings/checks.h"
#include "bindings/client_arguments.h"
#include "bindings/client_object.h"
#include "bindings/gil.h"
#include "bindings/json_conversion.h"
#include "bindings/storage_stats.h"
#include "bindings/tensor_conversion.h"
#include "bindings/timing_records.h"
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

const BatchMeta& checked_meta(nb::handle metadata, const char* description = "a BatchMeta") {
  check_instance(metadata, "metadata", batch_meta_class(), description);
  return nb::cast<const BatchMeta&>(metadata);
}

int64_t meta_size(nb::handle metadata) { return nb::cast<int64_t>(metadata.attr("size")); }

nb::object put(PyClient& self, nb::handle data, nb::handle metadata, nb::handle partition_id, nb::handle custom_meta,
               nb::handle allow_pickle) {
  if (metadata.is_none()) {
    check_name(partition_id, "partition_id");
  } else {
    checked_meta(metadata, "a BatchMeta or None");
  }
  nb::object metas = checked_custom_meta(custom_meta);
  static CachedAttribute to_columns("seqflow._convert", "to_columns");
  const auto columns = nb::cast<std::vector<Column>>(
      to_columns(data, "borrow"_a = self.is_remote(), "allow_pickle"_a = pickle_allowed(self, allow_pickle)));
  const size_t rows = !metadata.is_none() ? meta_size(metadata) : columns.empty() ? 0 : columns[0].sample_count();
  if (!metas.is_none() && nb::len(metas) == 0 && rows) {
    // The engine takes an empty list as none; a caller's [] for rows is a wrong length (its words).
    throw nb::value_error(
        ("custom_meta holds 0 entries for " + std::to_string(rows) + " samples; give one object per sample").c_str());
  }
  std::shared_ptr<Client> client = self.connected();
  if (metadata.is_none()) {
    const std::string partition = nb::cast<std::string>(partition_id);
    const std::vector<Value> values = custom_meta_from_python(metas);
    return python_meta(without_gil([&] { return client->put_new(partition, columns, values); }));
  }
  if (metas.is_none()) {
    static CachedAttribute any("builtins", "any");
    nb::object changed = metadata.attr("_changed_custom_meta")();
    if (!changed.is_none() && nb::cast<bool>(any(changed))) metas = changed;
  }
  const std::vector<Value> values = custom_meta_from_python(metas);
  nb::object target = metadata.attr("_to_native")();
  const BatchMeta& native = nb::cast<const BatchMeta&>(target);
  return python_meta(without_gil([&] { return client->put_existing(native, columns, values); }),
                     metadata.attr("extra_info"));
}

nb::object get_meta(PyClient& self, nb::handle data_fields, nb::handle batch_size, nb::handle partition_id,
                    nb::handle mode, nb::handle task_name, nb::handle sampling_config, nb::handle timeout,
                    nb::handle polling) {
  MetaRequest request;
  request.fields = strings(check_names(data_fields, "data_fields"));
  request.batch_size = check_int64(batch_size, "batch_size");
  request.partition_id = nb::cast<std::string>(check_name(partition_id, "partition_id"));
  // Kept for the life of the process (a static nb::object would be released after the interpreter is gone).
  static nb::handle modes = nb::make_tuple("fetch", "force_fetch", "insert").release();
  request.mode = parse_meta_mode(nb::cast<std::string>(check_choice(mode, "mode", nb::borrow<nb::tuple>(modes))));
  const nb::object task = check_optional_name(task_name, "task_name");
  request.task_name = task.is_none() ? "" : nb::cast<std::string>(task);
  request.sampling = sampling_config_of(sampling_config);
  const double seconds = timeout.is_none() ? self.timeout : check_seconds(timeout, "timeout", true);
  request.polling = check_optional_bool(polling, "polling").value_or(self.polling_mode());
  request.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
  std::shared_ptr<Client> client = self.connected();
  return python_meta(without_gil([&] { return client->get_meta(request); }));
}

// The engine's rows of `names` for `meta`, one dict entry per field that has any.
nb::dict fetched_fields(Client& client, const BatchMeta& meta, const std::vector<std::string>& names, nb::handle nested,
                        const FieldOutput& output) {
  std::vector<std::vector<SampleView>> per_field(names.size());
  {
    GilReleased release;
    std::vector<std::vector<SampleView>> rows = client.get_data(meta, names);
    for (auto& column : per_field) column.reserve(rows.size());
    for (auto& row : rows) {
      for (size_t f = 0; f < names.size(); ++f) per_field[f].push_back(std::move(row[f]));
    }
  }
  nb::dict out;
  for (size_t f = 0; f < names.size(); ++f) {
    FieldOutput field_output = output;
    field_output.nested = nb::cast<bool>(nested[nb::int_(f)]);
    if (!per_field[f].empty()) out[names[f].c_str()] = field_to_python(per_field[f], names[f], field_output);
  }
  return out;
}

nb::object set_custom_meta(PyClient& self, nb::handle metadata) {
  const BatchMeta& meta = checked_meta(metadata);
  const size_t n = meta.size();
  if (n == 0) return nb::none();
  const std::vector<Value> metas = custom_meta_from_python(metadata.attr("custom_meta"));
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
  return nb::none();
}

nb::object load_checkpoint(PyClient& self, nb::handle directory) {
  const std::string path = nb::cast<std::string>(check_path(directory, "directory"));
  std::shared_ptr<Client> client = self.connected();
  Value user_metadata;
  try {
    user_metadata = without_gil([&] { return client->load_checkpoint(path); });
  } catch (const Error& error) {
    if (error.code() != ErrorCode::kNotFound) throw;
    nb::object raised =
        nb::handle(PyExc_FileNotFoundError)(ENOENT, error.what()[0] ? error.what() : "no checkpoint", path);
    PyErr_SetObject(PyExc_FileNotFoundError, raised.ptr());
    throw nb::python_error();
  }
  return from_value(user_metadata);
}

void report_timings(PyClient& self, nb::handle task_name, nb::handle records) {
  const std::string task = nb::cast<std::string>(check_name(task_name, "task_name"));
  static CachedAttribute timing_columns("seqflow.balance", "timing_columns");
  nb::tuple columns = nb::borrow<nb::tuple>(timing_columns(records));
  const std::vector<TimingRecord> timings =
      timing_records(nb::cast<std::vector<Int64Input>>(columns[0]), nb::cast<std::vector<double>>(columns[1]));
  std::shared_ptr<Client> client = self.connected();
  without_gil([&] { client->control().report_timing(task, timings); });
}

void report_timing(PyClient& self, nb::handle task_name, nb::handle lengths, nb::handle seconds) {
  nb::list records;
  records.append(nb::make_tuple(lengths, seconds));
  report_timings(self, task_name, records);
}

}  // namespace

nb::handle batch_meta_class() {
  static CachedAttribute kind("seqflow.batch_meta", "BatchMeta");
  return kind;
}

nb::handle kv_batch_meta_class() {
  static CachedAttribute kind("seqflow.batch_meta", "KVBatchMeta");
  return kind;
}

nb::object python_meta(BatchMeta&& native, nb::handle extra_info) {
  return batch_meta_class().attr("_from_native")(nb::cast(std::move(native)), extra_info);
}

nb::object get_data(PyClient& self, nb::handle metadata, nb::handle fields, nb::handle format, nb::handle copy,
                    nb::handle layout, nb::handle allow_pickle) {
  const BatchMeta& meta = checked_meta(metadata);
  static CachedAttribute resolve_format("seqflow._convert", "resolve_format");
  const nb::object fmt = resolve_format(format, layout);
  const nb::object names = fields.is_none() ? nb::object(metadata.attr("field_names")) : check_names(fields, "fields");
  const bool fresh_copy = check_bool(copy, "copy");
  const bool pickled = pickle_allowed(self, allow_pickle);
  nb::object native = nb::dict();
  if (meta.size()) {
    static CachedAttribute nested_flags("seqflow._convert", "nested_flags");
    std::shared_ptr<Client> client = self.connected();
    // A remote get's buffers are this call's own already: copying them again would be waste.
    const FieldOutput output{false, fresh_copy && !self.is_remote(), fresh_copy || !fmt.equal(nb::str("numpy")),
                             pickled};
    native = fetched_fields(*client, meta, strings(names), nested_flags(names, metadata), output);
  }
  static CachedAttribute from_native("seqflow._convert", "from_native");
  return from_native(names, native, metadata, fmt, layout);
}

void bind_client_calls(ClientClass& cls) {
  cls.def("put", &put, "data"_a.none(), "metadata"_a.none() = nb::none(), "partition_id"_a.none() = nb::none(),
          "custom_meta"_a.none() = nb::none(), nb::kw_only(), "allow_pickle"_a.none() = nb::none(),
          nb::sig("def put(self, data, metadata: Optional[BatchMeta] = None, partition_id: Optional[str] = None, "
                  "custom_meta: Optional[Sequence[dict]] = None, *, allow_pickle: Optional[bool] = None) -> BatchMeta"),
          R"(Without metadata: new samples in partition_id, one per row of data.
With metadata: more fields of those samples. custom_meta (one dict per
sample; default metadata.custom_meta) becomes visible with the data.
Which values a field may hold: see seqflow._convert; allow_pickle
(default: the client's) lets other objects be stored pickled.)");
  cls.def("get_meta", &get_meta, "data_fields"_a.none(), "batch_size"_a.none(), "partition_id"_a.none(),
          "mode"_a.none() = "fetch", "task_name"_a.none() = nb::none(), "sampling_config"_a.none() = nb::none(),
          nb::kw_only(), "timeout"_a.none() = nb::none(), "polling"_a.none() = nb::none(),
          nb::sig("def get_meta(self, data_fields, batch_size: int, partition_id: str, mode: str = 'fetch', "
                  "task_name: Optional[str] = None, sampling_config: Optional[Mapping[str, Any]] = None, *, "
                  "timeout: Optional[float] = None, polling: Optional[bool] = None) -> BatchMeta"),
          R"(fetch: ready samples through the sampler, consumed for task_name;
force_fetch: every sample of the partition, also those lacking a
field (their production status says so), nothing consumed; insert:
new empty samples. sampling_config: {"dp_rank": r, "batch_index": b,
...}: the sampler gets every key as a keyword argument, as in
TransferQueue (dp_rank only when given; values JSON/MessagePack-able).
polling (default the client's polling_mode): an empty batch at once
when too little is ready; otherwise wait up to timeout seconds, then
TimeoutError. A partition that does not exist has nothing ready: a
waiting fetch waits for it to be created and filled.)");
  cls.def("get_data", &get_data, "metadata"_a.none(), nb::kw_only(), "fields"_a.none() = nb::none(),
          "format"_a.none() = "auto", "copy"_a.none() = true, "layout"_a.none() = "dense",
          "allow_pickle"_a.none() = nb::none(),
          nb::sig("def get_data(self, metadata: BatchMeta, *, fields: Optional[Iterable[str]] = None, "
                  "format: str = 'auto', copy: bool = True, layout: str = 'dense', "
                  "allow_pickle: Optional[bool] = None)"),
          R"(The data of metadata's samples (its fields, or `fields`): a
TensorDict when tensordict is installed, else a dict (format: "auto",
"tensordict", "torch", "numpy"); non-tensor fields as a NonTensorStack
or a list, one value per sample.

copy (default): the arrays are the caller's, so writing into them
changes nothing stored. copy=False: no copy where the samples lie back
to back in storage; numpy arrays are then read-only views, torch
tensors share the stored bytes (torch has no read-only tensors:
writing into one changes what every reader gets; clone it first).
layout "dense": rows of one shape as one tensor, others nested;
"transfer_queue": TransferQueue's containers, nested unless every row
is 0-d (see seqflow._convert). allow_pickle (default: the client's):
read values stored pickled.)");
  cls.def("set_custom_meta", &set_custom_meta, "metadata"_a.none(),
          nb::sig("def set_custom_meta(self, metadata: BatchMeta) -> None"),
          "Merges metadata.custom_meta into the controller's, key by key.");
  cls.def(
      "clear_partition",
      [](PyClient& self, nb::handle partition_id) {
        const std::string partition = nb::cast<std::string>(check_name(partition_id, "partition_id"));
        std::shared_ptr<Client> client = self.connected();
        without_gil([&] { client->clear_partition(partition); });
      },
      "partition_id"_a.none(), nb::sig("def clear_partition(self, partition_id: str) -> None"),
      R"(Removes the partition: its samples, their data, consumption and
keys. A partition that does not exist (never made, or cleared) is
left as it is, as in TransferQueue.)");
  cls.def(
      "clear_samples",
      [](PyClient& self, nb::handle metadata) {
        const BatchMeta& meta = checked_meta(metadata);
        std::shared_ptr<Client> client = self.connected();
        GilReleased release;
        for (const BatchMeta& part : meta.chunk_by_partition()) {
          client->clear_samples(part.partition_ids[0], part.global_indexes, part.generations);
        }
      },
      "metadata"_a.none(), nb::sig("def clear_samples(self, metadata: BatchMeta) -> None"),
      R"(Removes these samples and their data; the partition stays (listed,
maybe empty). Samples already cleared are skipped.)");
  cls.def(
      "reset_consumption",
      [](PyClient& self, nb::handle partition_id, nb::handle task_name) {
        const std::string partition = nb::cast<std::string>(check_name(partition_id, "partition_id"));
        const auto task = nb::cast<std::optional<std::string>>(check_optional_name(task_name, "task_name"));
        std::shared_ptr<Client> client = self.connected();
        without_gil([&] { client->control().reset_consumption(partition, task ? &*task : nullptr); });
        return true;
      },
      "partition_id"_a.none(), "task_name"_a.none() = nb::none(),
      nb::sig("def reset_consumption(self, partition_id: str, task_name: Optional[str] = None) -> bool"),
      R"(Makes every sample unconsumed again for task_name (None: every
task), so the same data can be fetched again. True, as in
TransferQueue, also for a partition that does not exist.)");
  cls.def(
      "get_consumption_status",
      [](PyClient& self, nb::handle task_name, nb::handle partition_id) {
        const std::string task = nb::cast<std::string>(check_name(task_name, "task_name"));
        const std::string partition = nb::cast<std::string>(check_name(partition_id, "partition_id"));
        std::shared_ptr<Client> client = self.connected();
        return status_to_python(without_gil([&] { return client->control().consumption_status(task, partition); }));
      },
      "task_name"_a.none(), "partition_id"_a.none(),
      nb::sig("def get_consumption_status(self, task_name: str, partition_id: str)"),
      R"((global indexes ascending (int64), consumed-by-task flags (bool));
(None, None) for a partition that does not exist, as in
TransferQueue.)");
  cls.def(
      "check_consumption_status",
      [](PyClient& self, nb::handle task_name, nb::handle partition_id) {
        const std::string task = nb::cast<std::string>(check_name(task_name, "task_name"));
        const std::string partition = nb::cast<std::string>(check_name(partition_id, "partition_id"));
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->control().all_consumed(task, partition); });
      },
      "task_name"_a.none(), "partition_id"_a.none(),
      nb::sig("def check_consumption_status(self, task_name: str, partition_id: str) -> bool"),
      R"(True when the partition has samples and the task consumed all of
them; False for a partition that does not exist.)");
  cls.def(
      "get_production_status",
      [](PyClient& self, nb::handle data_fields, nb::handle partition_id, nb::handle per_field) {
        const bool each_field = check_bool(per_field, "per_field");
        const std::vector<std::string> names = strings(check_names(data_fields, "data_fields"));
        const std::string partition = nb::cast<std::string>(check_name(partition_id, "partition_id"));
        std::shared_ptr<Client> client = self.connected();
        nb::tuple status =
            production_to_python(without_gil([&] { return client->control().production_status(names, partition); }));
        if (status[1].is_none() || each_field) return status;
        return nb::make_tuple(status[0], status[1].attr("all")("axis"_a = 1));  // all of the fields, per sample
      },
      "data_fields"_a.none(), "partition_id"_a.none(), nb::kw_only(), "per_field"_a.none() = false,
      nb::sig("def get_production_status(self, data_fields, partition_id: str, *, per_field: bool = False)"),
      R"((global indexes ascending (int64), flags (bool)): per sample, all
of data_fields produced; with per_field, one column per field
(TransferQueue's layout: shape (samples, fields)). A field no sample
of the partition ever had is produced nowhere. (None, None) for a
partition that does not exist, as in TransferQueue.)");
  cls.def(
      "check_production_status",
      [](PyClient& self, nb::handle data_fields, nb::handle partition_id) {
        const std::vector<std::string> names = strings(check_names(data_fields, "data_fields"));
        const std::string partition = nb::cast<std::string>(check_name(partition_id, "partition_id"));
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->control().all_produced(names, partition); });
      },
      "data_fields"_a.none(), "partition_id"_a.none(),
      nb::sig("def check_production_status(self, data_fields, partition_id: str) -> bool"),
      R"(True when the partition has samples and all of them have the
fields; False for a partition that does not exist.)");
  cls.def(
      "get_partition_list",
      [](PyClient& self) {
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->control().partition_list(); });
      },
      nb::sig("def get_partition_list(self) -> list[str]"),
      R"(Partitions from their first put (or key) until clear_partition;
clear_samples and kv_clear leave them listed.)");
  cls.def(
      "stats",
      [](PyClient& self) {
        std::shared_ptr<Client> client = self.connected();
        return stats_to_python(without_gil([&] { return client->storage_stats(); }));
      },
      nb::sig("def stats(self) -> dict"),
      R"(Storage use: {"samples": ..., "bytes": ..., "overhead_bytes": ...} (bookkeeping memory
per sample and value, an estimate; max_bytes bounds bytes + overhead_bytes).)");
  cls.def("report_timing", &report_timing, "task_name"_a.none(), "lengths"_a.none(), "seconds"_a.none(),
          nb::sig("def report_timing(self, task_name: str, lengths, seconds: float) -> None"),
          R"(How long one micro-batch of `task_name` took on this rank: the
lengths of its sequences and its seconds (e.g. forward + backward).
The controller fits the task's workload model to these timings in the
background; samplers made with workload="online" balance it.)");
  cls.def("report_timings", &report_timings, "task_name"_a.none(), "records"_a.none(),
          nb::sig("def report_timings(self, task_name: str, records) -> None"),
          R"(report_timing for many micro-batches in one call: an iterable of
(lengths, seconds) pairs or {"lengths": ..., "seconds": ...} dicts.
A bad record raises ValueError naming it, and none is taken.)");
  cls.def(
      "task_workload",
      [](PyClient& self, nb::handle task_name) {
        const std::string task = nb::cast<std::string>(check_name(task_name, "task_name"));
        std::shared_ptr<Client> client = self.connected();
        return without_gil([&] { return client->control().task_workload(task); });
      },
      "task_name"_a.none(), nb::sig("def task_workload(self, task_name: str)"),
      R"(The task's TaskWorkload (workload, reports, fitted): its current
fit, or the tokens prior until enough timings came; None before the
task's first report.)");
  cls.def(
      "save_checkpoint",
      [](PyClient& self, nb::handle directory, nb::handle include_storage, nb::handle metadata) {
        const std::string path = nb::cast<std::string>(check_path(directory, "directory"));
        check_bool(include_storage, "include_storage");
        Value user_metadata = Value::object();
        if (!metadata.is_none()) {
          static CachedAttribute mapping("collections.abc", "Mapping");
          static CachedAttribute dict("builtins", "dict");
          check_instance(metadata, "metadata", mapping, "a dict (JSON-able) or None");
          user_metadata = to_value(dict(metadata), "metadata");
        }
        std::shared_ptr<Client> client = self.connected();
        without_gil([&] { client->save_checkpoint(path, user_metadata); });
      },
      "directory"_a.none(), nb::kw_only(), "include_storage"_a.none() = true, "metadata"_a.none() = nb::none(),
      nb::sig("def save_checkpoint(self, directory: Union[str, os.PathLike], *, include_storage: bool = True, "
              "metadata: Optional[Mapping[str, Any]] = None) -> None"),
      R"(Controller (with the sampler's state) and storage, as one
directory replaced atomically; a crash keeps the previous checkpoint.
metadata (a JSON-able dict) is kept in the directory's metadata.json
under "user_metadata", as TransferQueue keeps it; load_checkpoint
returns it. include_storage=False is ignored, as TransferQueue ignores
it for in-memory storage: the data would be lost otherwise.)");
  cls.def("load_checkpoint", &load_checkpoint, "directory"_a.none(),
          nb::sig("def load_checkpoint(self, directory: Union[str, os.PathLike]) -> dict[str, Any]"),
          R"(Replaces the whole state; returns the metadata given to
save_checkpoint ({} if none). A directory that holds no checkpoint
raises FileNotFoundError naming it; a corrupt one ValueError; the
state is unchanged after either.)");
}

}  // namespace seqflow::bindings
