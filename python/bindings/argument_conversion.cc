// The conversions of bindings/arguments.h's typed parameters, with the
// messages of seqflow._arguments and seqflow._checks.
#include <nanobind/stl/string.h>

#include <cmath>
#include <optional>
#include <string>

#include "bindings/arguments.h"
#include "seqflow/error.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

// Paths go to the file system, whose own limit (PATH_MAX) is larger than a name's.
constexpr Py_ssize_t kMaxPathBytes = 4096;
constexpr Py_ssize_t kShortRepr = 80;

std::string repr_of(nb::handle value) { return nb::repr(value).c_str(); }

// repr(value), at most 80 characters of it and the length when longer.
std::string short_repr(nb::handle value) {
  nb::str text = nb::repr(value);
  const Py_ssize_t length = PyUnicode_GET_LENGTH(text.ptr());
  if (length <= kShortRepr) return text.c_str();
  nb::str head = nb::steal<nb::str>(PyUnicode_Substring(text.ptr(), 0, kShortRepr));
  return std::string(head.c_str()) + "... (" + std::to_string(length) + " characters)";
}

[[noreturn]] void throw_wrong_type(nb::handle value, std::string_view name, std::string_view description) {
  throw ArgumentTypeError(std::string(name) + " must be " + std::string(description) + ", got " +
                          nb::cast<std::string>(value.type().attr("__name__")) + " " + short_repr(value));
}

// What makes the str `text` no path, or nothing.
std::optional<std::string> text_problem(nb::handle text, Py_ssize_t limit) {
  PyObject* str = text.ptr();
  const Py_ssize_t length = PyUnicode_GET_LENGTH(str);
  if (length == 0) return "must not be empty";
  if (PyUnicode_FindChar(str, 0, 0, length, 1) >= 0) return "must not contain NUL ('\\x00')";
  Py_ssize_t size = length;
  if (!PyUnicode_IS_ASCII(str) && PyUnicode_AsUTF8AndSize(str, &size) == nullptr) {
    PyErr_Clear();
    return "must be valid UTF-8 (it holds a lone surrogate)";
  }
  if (size > limit) return "must be at most " + std::to_string(limit) + " bytes of UTF-8, has " + std::to_string(size);
  return std::nullopt;
}

// An exact int within int64 (the common case, without a call into Python),
// into `out`. Inlined, with no optional: a list's loop calls it per element,
// and an optional returned through memory stalled each call on its flag byte.
inline bool exact_int(PyObject* value, int64_t& out) {
  if (!PyLong_CheckExact(value)) return false;
  int overflow = 0;
  out = PyLong_AsLongLongAndOverflow(value, &overflow);
  return overflow == 0;
}

// An element of a sequence of lengths as numpy's conversion takes it
// (seqflow._arrays): an integer, or a float that is whole and within int64
// (1.0, np.float64(7.0)); nothing for anything else.
std::optional<int64_t> whole_number(nb::handle value) {
  if (PyBool_Check(value.ptr())) return std::nullopt;
  if (PyIndex_Check(value.ptr())) {
    nb::object integer = nb::steal(PyNumber_Index(value.ptr()));
    int overflow = 0;
    const long long number = integer.is_valid() ? PyLong_AsLongLongAndOverflow(integer.ptr(), &overflow) : 0;
    if (integer.is_valid() && overflow == 0) return number;
    PyErr_Clear();
    return std::nullopt;
  }
  if (!PyFloat_Check(value.ptr()) && Py_TYPE(value.ptr())->tp_as_number == nullptr) return std::nullopt;
  const double number = PyFloat_AsDouble(value.ptr());
  if (number == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return std::nullopt;
  }
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (!std::isfinite(number) || std::floor(number) != number || number < -kTwoTo63 || number >= kTwoTo63) {
    return std::nullopt;
  }
  return static_cast<int64_t>(number);
}

}  // namespace

int64_t integer_argument(nb::handle value, std::string_view name) {
  // An integer is what has __index__ (an int, a numpy or a 0-d torch integer); a bool has it too, but is none.
  nb::object integer;
  if (!PyBool_Check(value.ptr()) && PyIndex_Check(value.ptr())) integer = nb::steal(PyNumber_Index(value.ptr()));
  if (!integer.is_valid()) {
    PyErr_Clear();
    throw_invalid(std::string(name) + " must be an integer, got " + repr_of(value));
  }
  int overflow = 0;
  const long long number = PyLong_AsLongLongAndOverflow(integer.ptr(), &overflow);
  if (overflow != 0) {
    throw_invalid(std::string(name) + " = " + nb::str(integer).c_str() + " is outside the int64 range");
  }
  return number;
}

std::vector<int64_t> integers_argument(nb::handle values, std::string_view name) {
  nb::object items;
  if (!PyUnicode_Check(values.ptr()) && !PyBytes_Check(values.ptr())) items = nb::steal(PyObject_GetIter(values.ptr()));
  if (!items.is_valid()) {
    PyErr_Clear();
    throw_wrong_type(values, name, "a sequence of integers");
  }
  std::vector<int64_t> out;
  for (nb::handle value : nb::borrow<nb::iterator>(items)) {
    int64_t exact = 0;
    std::optional<int64_t> number = exact_int(value.ptr(), exact) ? std::optional<int64_t>(exact) : whole_number(value);
    // The element's name is built for an error only.
    out.push_back(number ? *number
                         : integer_argument(value, std::string(name) + "[" + std::to_string(out.size()) + "]"));
  }
  return out;
}

bool int_list(nb::handle value, std::vector<int64_t>& out) noexcept {
  if (!PyList_CheckExact(value.ptr())) return false;
  // Nothing below runs Python code, so the list cannot change under the loop.
  const Py_ssize_t size = PyList_GET_SIZE(value.ptr());
  try {
    out.resize(static_cast<size_t>(size));
  } catch (const std::bad_alloc&) {
    return false;
  }
  for (Py_ssize_t i = 0; i < size; ++i) {
    if (!exact_int(PyList_GET_ITEM(value.ptr(), i), out[static_cast<size_t>(i)])) return false;
  }
  return true;
}

std::string text_argument(nb::handle value, std::string_view name) {
  if (!PyUnicode_Check(value.ptr())) throw_wrong_type(value, name, "a str");
  return nb::cast<std::string>(value);
}

std::filesystem::path path_argument(nb::handle value, std::string_view name) {
  nb::object path;
  if (PyUnicode_Check(value.ptr())) {
    path = nb::borrow(value);
  } else if (PyObject_HasAttrString(reinterpret_cast<PyObject*>(Py_TYPE(value.ptr())), "__fspath__") == 1) {
    path = nb::steal(PyOS_FSPath(value.ptr()));
    if (!path.is_valid()) throw nb::python_error();
  }
  if (!path.is_valid() || !PyUnicode_Check(path.ptr())) throw_wrong_type(value, name, "a str or an os.PathLike");
  if (std::optional<std::string> problem = text_problem(path, kMaxPathBytes)) {
    throw_invalid(std::string(name) + " " + *problem + ", got " + short_repr(value));
  }
  return nb::cast<std::string>(path);
}

}  // namespace seqflow::bindings
