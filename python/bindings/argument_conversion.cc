#include <nanobind/stl/string.h>

#include <string>

#include "bindings/arguments.h"
#include "seqflow/error.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

std::string repr_of(nb::handle value) { return nb::repr(value).c_str(); }

bool is_numpy_integer(nb::handle value) {
  // Looked up once and kept for the life of the process (numpy is never unloaded).
  static PyObject* numpy_integer = [] {
    nb::object numpy = nb::steal(PyImport_ImportModule("numpy"));
    if (!numpy.is_valid()) {
      PyErr_Clear();
      return static_cast<PyObject*>(nullptr);
    }
    return nb::object(numpy.attr("integer")).release().ptr();
  }();
  return numpy_integer != nullptr && PyObject_IsInstance(value.ptr(), numpy_integer) == 1;
}

[[noreturn]] void throw_outside(nb::handle integer, std::string_view name, const std::string& range) {
  throw_invalid(std::string(name) + " = " + nb::str(integer).c_str() + " is outside " + range);
}

}  // namespace

std::optional<nb::int_> python_integer(nb::handle value) {
  if (PyBool_Check(value.ptr()) || !(PyLong_Check(value.ptr()) || is_numpy_integer(value))) return std::nullopt;
  PyObject* integer = PyNumber_Index(value.ptr());
  if (integer == nullptr) throw nb::python_error();
  return nb::steal<nb::int_>(integer);
}

int64_t int_argument(nb::handle value, std::string_view name, int64_t low, int64_t high) {
  const std::optional<nb::int_> integer = python_integer(value);
  if (!integer) throw_invalid(std::string(name) + " must be an integer, got " + repr_of(value));
  int overflow = 0;
  const long long number = PyLong_AsLongLongAndOverflow(integer->ptr(), &overflow);
  const bool full = low == std::numeric_limits<int64_t>::min() && high == std::numeric_limits<int64_t>::max();
  if (overflow != 0 || number < low || number > high) {
    throw_outside(*integer, name, full ? "the int64 range" : std::to_string(low) + ".." + std::to_string(high));
  }
  return number;
}

std::optional<int64_t> optional_int_argument(nb::handle value, std::string_view name) {
  if (value.is_none()) return std::nullopt;
  return int_argument(value, name);
}

}  // namespace seqflow::bindings
