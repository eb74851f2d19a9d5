// The checks and copies of seqflow.BatchMeta's constructor arguments that
// hold Python objects (the engine's columns are checked by the engine):
// global_indexes, generations, one dict per sample, field_schema.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bindings/arrays.h"
#include "bindings/checks.h"
#include "bindings/field_schema.h"
#include "bindings/submodules.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

using UInt64Array = nb::ndarray<nb::numpy, uint64_t, nb::ndim<1>>;

bool is_instance(nb::handle value, const char* module, const char* type) {
  const int is = PyObject_IsInstance(value.ptr(), nb::module_::import_(module).attr(type).ptr());
  if (is < 0) throw nb::python_error();
  return is == 1;
}

bool is_iterable(nb::handle value) { return is_instance(value, "collections.abc", "Iterable"); }
bool is_integer(nb::handle value) { return !PyBool_Check(value.ptr()) && is_instance(value, "numbers", "Integral"); }
bool is_text(nb::handle value) { return PyUnicode_Check(value.ptr()) || PyBytes_Check(value.ptr()); }

[[noreturn]] void throw_type_error(const std::string& message) { throw nb::type_error(message.c_str()); }

nb::list list_of(nb::handle values) { return nb::steal<nb::list>(PySequence_List(values.ptr())); }

// The integer as int64, or nothing when it lies outside; `above` says on which side.
std::optional<int64_t> as_int64(nb::handle integer, bool& above) {
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(nb::int_(integer).ptr(), &overflow);
  above = overflow > 0;
  if (overflow != 0) return std::nullopt;
  return value;
}

Int64Array index_array(nb::handle values) {
  const auto refuse = [&] { throw_type_error("global_indexes must be a list of integers, got " + repr_text(values)); };
  if (is_text(values) || !is_iterable(values)) refuse();
  nb::list items;
  if (nb::hasattr(values, "dtype") && nb::hasattr(values, "ndim")) {  // a numpy array
    if (nb::cast<int64_t>(values.attr("size")) == 0) return to_numpy(std::vector<int64_t>{});
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
  return to_numpy(std::move(out));
}

std::optional<UInt64Array> generation_array(nb::handle values, size_t n) {
  if (values.is_none()) return std::nullopt;
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
  return to_numpy(std::move(out));
}

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
    nb::object own = copy_entries
                         ? nb::steal(PyObject_CallOneArg(reinterpret_cast<PyObject*>(&PyDict_Type), entry.ptr()))
                         : nb::borrow(entry);
    if (!own.is_valid()) throw nb::python_error();
    out.append(own);
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

}  // namespace

void bind_batch_meta_arguments(nb::module_ m) {
  m.def("index_array", &index_array, nb::arg("values").none(), "global_indexes as an int64 array.");
  m.def("generation_array", &generation_array, nb::arg("values").none(), nb::arg("n"),
        "generations as a uint64 array (one per sample), or None.");
  m.def("dict_list", &dict_list, nb::arg("values").none(), nb::arg("n"), nb::arg("name"),
        nb::arg("copy_entries") = true, nb::arg("empty_is_none") = true,
        "One dict per sample (empty ones for None, and for [] unless not empty_is_none).");
  m.def("checked_schema", &checked_schema, nb::arg("field_schema").none(), nb::arg("n"),
        "field_schema checked against n samples, as a copy.");
}

}  // namespace seqflow::bindings
