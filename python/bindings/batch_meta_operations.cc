// seqflow.BatchMeta's selections and joins: the engine cuts and joins the
// columns (include/seqflow/batch_meta.h); the Python members follow, copied
// as TransferQueue 0.1.11 copies them (custom_meta still encoded stays so).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "bindings/arrays.h"
#include "bindings/batch_meta_object.h"
#include "bindings/checks.h"
#include "bindings/deep_copy.h"
#include "bindings/extra_info.h"
#include "bindings/field_schema.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {
namespace {

std::vector<int64_t> int64s(nb::handle values) {
  std::vector<int64_t> out;
  for (nb::handle value : values) out.push_back(nb::cast<int64_t>(value));
  return out;
}

nb::list copied_items(nb::handle values, const std::vector<int64_t>& at) {
  nb::list out;
  for (int64_t i : at) out.append(deep_copy(values[nb::int_(i)]));
  return out;
}

// The samples at positions `at` (checked already).
PyBatchMeta rows(const PyBatchMeta& self, const std::vector<int64_t>& at) {
  bool run = true;
  for (size_t k = 1; k < at.size() && run; ++k) run = at[k] == at[k - 1] + 1;
  PyBatchMeta out;
  static_cast<BatchMeta&>(out) = !run         ? self.select_samples(at)
                                 : at.empty() ? self.slice(0, 0)
                                              : self.slice(at.front(), at.back() + 1);
  nb::object where = nb::cast(at);
  out.py_field_schema = copy_schema(self.py_field_schema, where);
  out.py_production_status = int8_status(self.py_production_status, false)[nb::cast(to_numpy(std::vector(at)))];
  out.py_extra_info = dict_of(self.py_extra_info);
  out.py_custom_meta = self.py_custom_meta.is_none() ? nb::none() : nb::object(copied_items(self.py_custom_meta, at));
  out.py_backend_meta =
      self.py_backend_meta.is_none() ? nb::none() : nb::object(copied_items(self.py_backend_meta, at));
  return out;
}

std::vector<int64_t> range(int64_t begin, int64_t end) {
  std::vector<int64_t> out;
  for (int64_t i = begin; i < end; ++i) out.push_back(i);
  return out;
}

std::vector<PyBatchMeta> split(const PyBatchMeta& self, nb::handle sizes) {
  nb::list given = list_of(sizes);
  std::vector<int64_t> counts;
  int64_t total = 0;
  bool valid = true;
  for (nb::handle size : given) {
    counts.push_back(check_count(size, "sizes", std::numeric_limits<int64_t>::min()));
    valid = valid && counts.back() >= 0;
    total += counts.back();
  }
  if (!valid || total != static_cast<int64_t>(self.size())) {
    throw nb::value_error(
        ("sizes " + str_text(given) + " must be >= 0 and add up to " + std::to_string(self.size())).c_str());
  }
  std::vector<PyBatchMeta> out;
  int64_t begin = 0;
  for (int64_t count : counts) {
    out.push_back(rows(self, range(begin, begin + count)));
    begin += count;
  }
  return out;
}

PyBatchMeta item(const PyBatchMeta& self, nb::handle item) {
  static CachedAttribute numpy_integer("numpy", "integer");
  const auto n = static_cast<int64_t>(self.size());
  if (!PyBool_Check(item.ptr()) &&
      (PyLong_Check(item.ptr()) || PyObject_IsInstance(item.ptr(), numpy_integer.ptr()) == 1)) {
    int overflow = 0;
    const long long at = PyLong_AsLongLongAndOverflow(nb::int_(item).ptr(), &overflow);
    if (overflow != 0 || at < -n || at >= n) {
      throw nb::index_error(
          ("BatchMeta index " + str_text(item) + " out of range for a batch of " + std::to_string(n)).c_str());
    }
    return rows(self, {at < 0 ? at + n : at});
  }
  if (PySlice_Check(item.ptr())) {
    Py_ssize_t start = 0;
    Py_ssize_t stop = 0;
    Py_ssize_t step = 0;
    if (PySlice_Unpack(item.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
    const Py_ssize_t count = PySlice_AdjustIndices(n, &start, &stop, step);
    std::vector<int64_t> at;
    for (Py_ssize_t k = 0; k < count; ++k) at.push_back(start + k * step);
    return rows(self, at);
  }
  throw nb::type_error(("Indexing with " + str_text(item.type()) + " is not supported; use an int or a slice").c_str());
}

PyBatchMeta select_fields(const PyBatchMeta& self, nb::handle field_names) {
  nb::list names;
  if (PyUnicode_Check(field_names.ptr())) {
    names.append(field_names);
  } else {
    names = list_of(field_names);
  }
  nb::list kept;
  std::vector<std::string> fields;
  nb::dict seen;
  for (nb::handle name : names) {
    if (seen.contains(name) || PySequence_Contains(self.py_field_schema.ptr(), name.ptr()) != 1) continue;
    seen[name] = nb::none();
    kept.append(name);
    fields.push_back(nb::cast<std::string>(name));
  }
  PyBatchMeta out;
  static_cast<BatchMeta&>(out) = self.select_fields(fields);
  nb::dict schema;
  for (nb::handle name : kept) schema[name] = self.py_field_schema[name];
  out.py_field_schema = copy_schema(schema, nb::none());
  out.py_production_status = int8_status(self.py_production_status, true);
  out.py_extra_info = deep_copy(self.py_extra_info);
  out.py_custom_meta = deep_copy(self.py_custom_meta);
  if (self.py_backend_meta.is_none()) {
    out.py_backend_meta = nb::none();
  } else {
    // Entries of the kept fields, and those of no field (an underscore key).
    nb::list backend;
    for (nb::handle entry : self.py_backend_meta) {
      nb::dict own;
      for (nb::handle pair : nb::object(entry.attr("items")())) {
        nb::object key = pair[0];
        if (nb::cast<std::string>(key).starts_with("_") || PySequence_Contains(kept.ptr(), key.ptr()) == 1)
          own[key] = deep_copy(pair[1]);
      }
      backend.append(own);
    }
    out.py_backend_meta = backend;
  }
  return out;
}

void reorder(PyBatchMeta& self, nb::handle indices) {
  nb::list given = list_of(indices);
  if (given.size() != self.size()) {
    throw nb::value_error(
        ("Indices length " + std::to_string(given.size()) + " mismatch batch size " + std::to_string(self.size()))
            .c_str());
  }
  nb::object unique = nb::steal(PySet_New(given.ptr()));
  if (!unique.is_valid()) throw nb::python_error();
  if (nb::len(unique) != self.size()) throw nb::value_error(("Indices contain duplicates: " + str_text(given)).c_str());
  const std::vector<int64_t> at = int64s(positions(given, static_cast<int64_t>(self.size()), "sample_indices"));
  PyBatchMeta other = rows(self, at);
  self.reorder(at);
  self.py_production_status = other.py_production_status;
  self.py_custom_meta = other.py_custom_meta;
  self.py_backend_meta = other.py_backend_meta;
  for (auto [name, entry] : nb::cast<nb::dict>(other.py_field_schema)) {
    if (PySequence_Contains(entry.ptr(), nb::str("per_sample_shapes").ptr()) == 1) {
      self.py_field_schema[name]["per_sample_shapes"] = entry["per_sample_shapes"];
    }
  }
}

// [dict(a) | b for a, b in zip(left, right)], each copied deeply.
nb::list merged_dicts(nb::handle left, nb::handle right) {
  nb::list out;
  const size_t n = nb::len(left);
  for (size_t i = 0; i < n; ++i) {
    nb::object merged = dict_of(deep_copy(left[nb::int_(i)]));
    merged.attr("update")(deep_copy(right[nb::int_(i)]));
    out.append(merged);
  }
  return out;
}

PyBatchMeta union_of(PyBatchMeta& self, nb::handle given) {
  if (given.is_none() || PyObject_IsTrue(given.ptr()) == 0) return copy_of(self);
  auto& other = nb::cast<PyBatchMeta&>(given);
  if (self.size() == 0) return copy_of(other);
  PyBatchMeta out;
  static_cast<BatchMeta&>(out) = to_native(self, false).union_with(to_native(other, false));
  nb::dict schema = copy_schema(self.py_field_schema, nb::none());
  schema.update(copy_schema(other.py_field_schema, nb::none()));
  out.py_field_schema = schema;
  const bool decoded = !self.py_custom_meta.is_none() || !other.py_custom_meta.is_none();
  out.py_custom_meta = decoded ? nb::object(merged_dicts(custom_meta_of(self), custom_meta_of(other))) : nb::none();
  const bool backend = !self.py_backend_meta.is_none() || !other.py_backend_meta.is_none();
  out.py_backend_meta = backend ? nb::object(merged_dicts(backend_meta_of(self), backend_meta_of(other))) : nb::none();
  static CachedAttribute bitwise_and("numpy", "bitwise_and");
  out.py_production_status =
      bitwise_and(int8_status(self.py_production_status, false), int8_status(other.py_production_status, false));
  nb::dict info;
  info.update(self.py_extra_info);
  info.update(other.py_extra_info);
  out.py_extra_info = info;
  return out;
}

nb::object concat(nb::handle type, nb::handle data, bool validate) {
  nb::list parts;
  if (!data.is_none() && PyObject_IsTrue(data.ptr()) == 1) {
    size_t i = 0;
    for (nb::handle part : data) {
      if (!part.is_none() && !nb::isinstance<PyBatchMeta>(part)) {
        throw_wrong_type(part, "data[" + std::to_string(i) + "]", "a BatchMeta or None");
      }
      if (!part.is_none() && nb::cast<PyBatchMeta&>(part).size() > 0) parts.append(part);
      ++i;
    }
  }
  if (parts.size() == 0) return type.attr("empty")();
  std::vector<BatchMeta> natives;
  bool decoded = false;
  bool backend = false;
  nb::list statuses;
  nb::list infos;
  for (nb::handle part : parts) {
    auto& meta = nb::cast<PyBatchMeta&>(part);
    natives.push_back(to_native(meta, false));
    decoded = decoded || !meta.py_custom_meta.is_none();
    backend = backend || !meta.py_backend_meta.is_none();
    statuses.append(int8_status(meta.py_production_status, false).attr("reshape")(-1));
    infos.append(meta.py_extra_info);
  }
  std::vector<const BatchMeta*> pointers;
  for (const BatchMeta& native : natives) pointers.push_back(&native);
  PyBatchMeta out;
  static_cast<BatchMeta&>(out) = BatchMeta::concat(pointers, validate);
  out.py_field_schema = concat_schema(parts);
  static CachedAttribute concatenate("numpy", "concatenate");
  out.py_production_status = concatenate(statuses);
  out.py_extra_info = merged_extra_info(infos, "BatchMeta");
  nb::list custom;
  nb::list backends;
  for (nb::handle part : parts) {
    auto& meta = nb::cast<PyBatchMeta&>(part);
    for (nb::handle entry : decoded ? custom_meta_of(meta) : nb::list()) custom.append(deep_copy(entry));
    for (nb::handle entry : backend ? backend_meta_of(meta) : nb::list()) backends.append(deep_copy(entry));
  }
  out.py_custom_meta = decoded ? nb::object(custom) : nb::none();
  out.py_backend_meta = backend ? nb::object(backends) : nb::none();
  return instance_of(type, std::move(out));
}

nb::object add_fields(nb::handle batch, nb::handle tensor_dict, nb::handle set_all_ready) {
  auto& self = nb::cast<PyBatchMeta&>(batch);
  nb::tuple found = schema_of(tensor_dict);
  const auto count = nb::cast<int64_t>(found[0]);
  if (count == 0) {
    static CachedAttribute get_logger("logging", "getLogger");
    get_logger("seqflow.batch_meta").attr("warning")("add_fields: the input holds no samples; nothing added");
    return nb::borrow(batch);
  }
  if (count != static_cast<int64_t>(self.size())) {
    throw nb::value_error(("add_fields batch size mismatch: self.size=" + std::to_string(self.size()) +
                           " vs tensor_dict=" + std::to_string(count))
                              .c_str());
  }
  self.py_field_schema.attr("update")(found[1]);
  const int all_ready = PyObject_IsTrue(set_all_ready.ptr());
  if (all_ready < 0) throw nb::python_error();
  if (all_ready == 1) {
    nb::object everything = nb::steal(PySlice_New(nullptr, nullptr, nullptr));
    if (PyObject_SetItem(self.py_production_status.ptr(), everything.ptr(), nb::int_(1).ptr()) != 0) {
      throw nb::python_error();
    }
  }
  return nb::borrow(batch);
}

}  // namespace

nb::object dict_of(nb::handle mapping) {
  nb::object out = nb::steal(PyObject_CallOneArg(reinterpret_cast<PyObject*>(&PyDict_Type), mapping.ptr()));
  if (!out.is_valid()) throw nb::python_error();
  return out;
}

PyBatchMeta copy_of(const PyBatchMeta& meta) {
  PyBatchMeta out;
  static_cast<BatchMeta&>(out) = meta.slice(0, meta.size());
  out.py_field_schema = copy_schema(meta.py_field_schema, nb::none());
  out.py_production_status = int8_status(meta.py_production_status, true);
  out.py_extra_info = deep_copy(meta.py_extra_info);
  out.py_custom_meta = deep_copy(meta.py_custom_meta);
  out.py_backend_meta = deep_copy(meta.py_backend_meta);
  return out;
}

void bind_batch_meta_operations(BatchMetaClass& cls) {
  cls.def(
         "select_samples",
         [](const PyBatchMeta& self, nb::handle sample_indices) {
           return rows(self, int64s(positions(sample_indices, static_cast<int64_t>(self.size()), "sample_indices")));
         },
         "sample_indices"_a.none(), "The samples at these positions (not global indexes) in [0, size), in this order.")
      .def("select_fields", &select_fields, "field_names"_a.none(),
           "The same samples with only those of these fields the batch has.")
      .def("__getitem__", &item, "item"_a.none(),
           "meta[i]: a batch of sample i (negative counts from the end); meta[a:b:c]: those samples.")
      .def(
          "chunk",
          [](const PyBatchMeta& self, nb::handle chunks) {
            return split(self, nb::cast(chunk_sizes(self.size(), count_of(chunks, "chunks"))));
          },
          "chunks"_a.none(), "`chunks` consecutive parts with sizes chunk_sizes(size, chunks).")
      .def("split", &split, "sizes"_a.none(), "Consecutive parts of the given sizes (they must add up to size).")
      .def(
          "chunk_by_partition",
          [](const PyBatchMeta& self) {
            std::vector<PyBatchMeta> out;
            for (const std::vector<int64_t>& at : self.partition_positions()) out.push_back(rows(self, at));
            return out;
          },
          "One part per partition, in order of first appearance.")
      .def("copy", &copy_of, "A deep copy (custom_meta still encoded stays so: the bytes are immutable).")
      .def("reorder", &reorder, "indices"_a.none(),
           "Puts the samples in the order of these positions (a permutation of 0..size-1), in place.")
      .def("union", &union_of, "other"_a.none(),
           "The same samples with the fields of both: other's schema, extra_info and custom_meta keys win on a "
           "clash; a sample is produced when both say so. An empty side gives a copy of the other.")
      .def("add_fields", &add_fields, "tensor_dict"_a.none(), "set_all_ready"_a.none() = true,
           "Adds the fields of a TensorDict (or dict of fields) with one row per sample to field_schema, in "
           "place; with set_all_ready every sample becomes produced. Returns self.");
  def_classmethod(cls, "concat", &concat, "cls"_a, "data"_a.none(), "validate"_a = true,
                  "The samples of all batches, in order (empty ones and None skipped). With validate, every batch "
                  "must have the same fields with the same dtypes. extra_info: the union; a key with two values "
                  "raises ValueError.");
}

}  // namespace seqflow::bindings
