// The checks and copies of seqflow.BatchMeta's constructor arguments:
// global_indexes, partition_ids, generations, field_schema,
// production_status, extra_info and the dicts per sample.
#include <nanobind/stl/string.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bindings/batch_meta_object.h"
#include "bindings/checks.h"
#include "bindings/field_schema.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

bool is_instance(nb::handle value, nb::handle type) {
  const int is = PyObject_IsInstance(value.ptr(), type.ptr());
  if (is < 0) throw nb::python_error();
  return is == 1;
}

bool is_iterable(nb::handle value) {
  static CachedAttribute iterable("collections.abc", "Iterable");
  return is_instance(value, iterable);
}
bool is_integer(nb::handle value) {
  static CachedAttribute integral("numbers", "Integral");
  return PyLong_CheckExact(value.ptr()) || (!PyBool_Check(value.ptr()) && is_instance(value, integral));
}
bool is_text(nb::handle value) { return PyUnicode_Check(value.ptr()) || PyBytes_Check(value.ptr()); }

[[noreturn]] void throw_type_error(const std::string& message) { throw nb::type_error(message.c_str()); }

// The integer as int64, or nothing when it lies outside; `above` says on which side.
std::optional<int64_t> as_int64(nb::handle integer, bool& above) {
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(nb::int_(integer).ptr(), &overflow);
  above = overflow > 0;
  if (overflow != 0) return std::nullopt;
  return value;
}

std::vector<int64_t> index_array(nb::handle values) {
  const auto refuse = [&] { throw_type_error("global_indexes must be a list of integers, got " + repr_text(values)); };
  if (is_text(values) || !is_iterable(values)) refuse();
  nb::list items;
  if (nb::hasattr(values, "dtype") && nb::hasattr(values, "ndim")) {  // a numpy array
    if (nb::cast<int64_t>(values.attr("size")) == 0) return {};
    const std::string kind = nb::cast<std::string>(values.attr("dtype").attr("kind"));
    if (nb::cast<int>(values.attr("ndim")) != 1 || (kind != "i" && kind != "u")) refuse();
    items = nb::cast<nb::list>(values.attr("tolist")());
  } else {
    items = list_of(values);
  }
  // numpy reads a list of bools only as bools (refused), a mix with integers as integers.
  size_t bools = 0;
  for (nb::handle item : items) {
    if (PyBool_Check(item.ptr()))
      ++bools;
    else if (!is_integer(item))
      refuse();
  }
  if (bools > 0 && bools == items.size()) refuse();
  std::vector<int64_t> out;
  out.reserve(items.size());
  for (nb::handle item : items) {
    bool above = false;
    const std::optional<int64_t> value = as_int64(item, above);
    if (!value && above) {
      throw nb::value_error(("global_indexes has values beyond the int64 range, got " + repr_text(values)).c_str());
    }
    if (!value) refuse();
    out.push_back(*value);
  }
  return out;
}

// None: not known (empty).
std::vector<uint64_t> generation_array(nb::handle values, size_t n) {
  if (values.is_none()) return {};
  if (is_text(values) || !is_iterable(values)) {
    throw_type_error("generations must be None or a list of integers, got " + repr_text(values));
  }
  nb::list items = list_of(values);
  if (items.size() != n) {
    throw nb::value_error(("Length mismatch: global_indexes has " + std::to_string(n) + ", generations has " +
                           std::to_string(items.size()))
                              .c_str());
  }
  std::vector<uint64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    nb::handle item = items[i];
    bool valid = is_integer(item);
    const unsigned long long value = valid ? PyLong_AsUnsignedLongLong(nb::int_(item).ptr()) : 0;
    if (valid && PyErr_Occurred()) {
      PyErr_Clear();
      valid = false;
    }
    if (!valid) {
      throw_type_error("generations[" + std::to_string(i) + "] must be an integer in [0, 2**64), got " +
                       repr_text(item));
    }
    out[i] = value;
  }
  return out;
}

nb::dict checked_schema(nb::handle field_schema, size_t n) {
  if (field_schema.is_none()) return {};
  if (!is_mapping(field_schema)) {
    throw_type_error("field_schema must be a dict of field name to dict, got " + type_name_of(field_schema));
  }
  for (nb::handle name : field_schema) {
    check_name(name, "field_schema key");
    nb::object entry = field_schema[name];
    const std::string shown = repr_text(name);
    if (!is_mapping(entry)) throw_type_error("field_schema[" + shown + "] must be a dict, got " + type_name_of(entry));
    nb::object shapes = entry.attr("get")("per_sample_shapes");
    if (!shapes.is_none() && nb::len(shapes) != n) {
      throw nb::value_error(("Field " + shown + " per_sample_shapes length " + std::to_string(nb::len(shapes)) +
                             " != batch_size " + std::to_string(n))
                                .c_str());
    }
  }
  return copy_schema(field_schema, nb::none());
}

// (one int8 per sample, samples x sorted fields bools or None). A samples x
// fields matrix in field_schema order gives both.
nb::tuple checked_status(nb::handle production_status, size_t n, nb::handle schema) {
  nb::module_ numpy = nb::module_::import_("numpy");
  if (production_status.is_none()) return nb::make_tuple(numpy.attr("zeros")(n, "dtype"_a = "int8"), nb::none());
  nb::object status = numpy.attr("array")(production_status, "copy"_a = true);
  const int ndim = nb::cast<int>(status.attr("ndim"));
  nb::list names = list_of(schema);
  if (ndim == 2 && status.attr("shape").equal(nb::make_tuple(n, names.size()))) {
    nb::object matrix = status.attr("astype")("bool");
    nb::object ready = names.size() ? nb::object(matrix.attr("all")("axis"_a = 1)) : numpy.attr("zeros")(n, "bool");
    std::vector<std::pair<std::string, size_t>> order;
    for (size_t j = 0; j < names.size(); ++j) order.emplace_back(nb::cast<std::string>(names[j]), j);
    std::sort(order.begin(), order.end());
    nb::list columns;
    for (const auto& [name, j] : order) columns.append(j);
    nb::object sorted = matrix[nb::make_tuple(nb::slice(nb::none(), nb::none(), nb::none()), columns)];
    return nb::make_tuple(ready.attr("astype")("int8"), numpy.attr("ascontiguousarray")(sorted));
  }
  if (ndim != 1 || nb::len(status) != n) {
    const std::string length = ndim ? std::to_string(nb::len(status)) : "n/a";
    throw nb::value_error(("production_status length " + length + " != batch_size " + std::to_string(n) +
                           " (give one value per sample, or a samples x fields matrix)")
                              .c_str());
  }
  return nb::make_tuple(status.attr("astype")("int8"), nb::none());
}

}  // namespace

nb::list dict_list(nb::handle values, size_t n, const std::string& name, bool copy_entries, bool empty_is_none) {
  const bool empty = (PyList_Check(values.ptr()) || PyTuple_Check(values.ptr())) && nb::len(values) == 0;
  nb::list out;
  if (values.is_none() || (empty_is_none && empty)) {
    for (size_t i = 0; i < n; ++i) out.append(nb::dict());
    return out;
  }
  if (is_text(values) || is_mapping(values) || !is_iterable(values)) {
    throw_type_error(name + " must be a list of dicts, one per sample, got " + type_name_of(values));
  }
  nb::list items = list_of(values);
  if (items.size() != n) {
    throw nb::value_error(
        (name + " length " + std::to_string(items.size()) + " != batch_size " + std::to_string(n)).c_str());
  }
  for (size_t i = 0; i < n; ++i) {
    nb::handle entry = items[i];
    if (!is_mapping(entry))
      throw_type_error(name + "[" + std::to_string(i) + "] must be a dict, got " + type_name_of(entry));
    out.append(copy_entries ? dict_of(entry) : nb::borrow(entry));
  }
  return out;
}

PyBatchMeta checked_batch_meta(nb::handle global_indexes, nb::handle partition_ids, nb::handle field_schema,
                               nb::handle production_status, nb::handle extra_info, nb::handle custom_meta,
                               nb::handle backend_meta, nb::handle generations) {
  PyBatchMeta meta;
  meta.global_indexes = index_array(global_indexes);
  const size_t n = meta.size();
  if (PyUnicode_Check(partition_ids.ptr())) {
    throw_type_error("partition_ids must be a list with one partition id per sample, got " + repr_text(partition_ids));
  }
  nb::list partitions = check_names(partition_ids, "partition_ids");
  if (partitions.size() != n) {
    throw nb::value_error(("Length mismatch: global_indexes has " + std::to_string(n) + ", partition_ids has " +
                           std::to_string(partitions.size()))
                              .c_str());
  }
  std::vector<std::string> ids;
  for (nb::handle id : partitions) ids.push_back(nb::cast<std::string>(id));
  meta.partition_ids = PartitionIdList(ids);
  meta.generations = generation_array(generations, n);
  nb::dict schema = checked_schema(field_schema, n);
  nb::tuple status = checked_status(production_status, n, schema);
  for (auto [name, entry] : schema) meta.field_schema.emplace(nb::cast<std::string>(name), FieldSchema{});
  if (!status[1].is_none()) {
    auto matrix = nb::cast<nb::ndarray<const bool, nb::ndim<2>, nb::c_contig, nb::device::cpu>>(status[1]);
    const auto* bits = reinterpret_cast<const uint8_t*>(matrix.data());
    meta.production_status.assign(bits, bits + matrix.shape(0) * matrix.shape(1));
  }
  if (!extra_info.is_none() && !is_mapping(extra_info)) {
    throw_type_error("extra_info must be a dict, got " + type_name_of(extra_info));
  }
  meta.py_field_schema = schema;
  meta.py_production_status = status[0];
  meta.py_extra_info = extra_info.is_none() ? nb::dict() : dict_of(extra_info);
  meta.py_backend_meta = PyObject_IsTrue(backend_meta.ptr()) == 1
                             ? nb::object(dict_list(backend_meta, n, "_custom_backend_meta", true, true))
                             : nb::none();
  meta.py_custom_meta = dict_list(custom_meta, n, "custom_meta", true, true);
  return meta;
}

}  // namespace seqflow::bindings
