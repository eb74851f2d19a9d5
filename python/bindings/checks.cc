// The argument checks of the bindings that still take Python objects
// (bindings/checks.h; seqflow/_checks.py has the same for Python), and the
// positions of selections.
#include "bindings/checks.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings/arrays.h"
#include "bindings/submodules.h"
#include "seqflow/limits.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

// Paths go to the file system, whose own limit (PATH_MAX) is larger than a name's.
constexpr int64_t kMaxPathBytes = 4096;
constexpr size_t kShortRepr = 80;

PyObject* argument_type_error_type = nullptr;

// numpy's scalar and array types, looked up once (numpy is never unloaded);
// nullptr without numpy.
PyObject* numpy_type(const char* name) {
  nb::object numpy = nb::steal(PyImport_ImportModule("numpy"));
  if (!numpy.is_valid()) {
    PyErr_Clear();
    return nullptr;
  }
  return nb::object(numpy.attr(name)).release().ptr();
}

bool is_instance(nb::handle value, PyObject* type) {
  return type != nullptr && PyObject_IsInstance(value.ptr(), type) == 1;
}

bool is_bool(nb::handle value) {
  static PyObject* numpy_bool = numpy_type("bool_");
  return PyBool_Check(value.ptr()) || is_instance(value, numpy_bool);
}

bool is_integer(nb::handle value) {
  static PyObject* numpy_integer = numpy_type("integer");
  return !is_bool(value) && (PyLong_Check(value.ptr()) || is_instance(value, numpy_integer));
}

[[noreturn]] void throw_value_error(const std::string& message) { throw nb::value_error(message.c_str()); }

bool has_iter(nb::handle value) { return PyObject_HasAttrString(value.ptr(), "__iter__") == 1; }

// What breaks the name rule in `text`, or nothing.
std::optional<std::string> text_problem(nb::handle text, int64_t limit) {
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

[[noreturn]] void throw_not_positions(nb::handle values, const std::string& parameter) {
  throw_value_error(parameter + " must be a list of integer positions, got " + repr_text(values));
}

}  // namespace

// `values` as a list of positions in [0, size); ValueError naming the parameter otherwise.
nb::list positions(nb::handle values, int64_t size, const std::string& parameter) {
  nb::list items;
  if (is_ndarray(values)) {
    const std::string kind = nb::cast<std::string>(values.attr("dtype").attr("kind"));
    const bool empty = nb::cast<int64_t>(values.attr("size")) == 0;
    if (empty) return items;
    if (nb::cast<int>(values.attr("ndim")) != 1 || (kind != "i" && kind != "u")) {
      throw_not_positions(values, parameter);
    }
    items = nb::cast<nb::list>(values.attr("tolist")());
  } else {
    items = list_of(values);
  }
  // numpy reads a list of bools only as bools (refused), a mix with integers as integers.
  size_t bools = 0;
  bool inside = true;
  for (size_t i = 0; i < items.size(); ++i) {
    PyObject* item = PyList_GET_ITEM(items.ptr(), static_cast<Py_ssize_t>(i));
    if (!PyLong_CheckExact(item)) {
      if (!is_integer(item) && !is_bool(item)) throw_not_positions(values, parameter);
      bools += is_bool(item) ? 1 : 0;
      nb::object integer = nb::steal(PyNumber_Index(item));
      if (!integer.is_valid()) throw nb::python_error();
      PyList_SetItem(items.ptr(), static_cast<Py_ssize_t>(i), integer.release().ptr());
      item = PyList_GET_ITEM(items.ptr(), static_cast<Py_ssize_t>(i));
    }
    int overflow = 0;
    const long long at = PyLong_AsLongLongAndOverflow(item, &overflow);
    inside = inside && overflow == 0 && at >= 0 && at < size;
  }
  if (bools > 0 && bools == items.size()) throw_not_positions(values, parameter);
  nb::list& out = items;
  if (!inside) {
    throw_value_error(parameter + " must lie in [0, " + std::to_string(size) + "), got " + repr_text(out));
  }
  return out;
}

bool is_ndarray(nb::handle value) {
  static PyObject* ndarray = numpy_type("ndarray");
  return is_instance(value, ndarray);
}

nb::list check_names(nb::handle values, const std::string& parameter) {
  nb::list names;
  if (PyUnicode_Check(values.ptr())) {
    names.append(check_name(values, parameter));
    return names;
  }
  if (PyBytes_Check(values.ptr()) || PyByteArray_Check(values.ptr()) || !has_iter(values)) {
    throw_wrong_type(values, parameter, "a str or a list of str");
  }
  names = list_of(values);
  const size_t count = names.size();
  for (size_t i = 0; i < count; ++i) {
    PyObject* name = PyList_GET_ITEM(names.ptr(), static_cast<Py_ssize_t>(i));
    // The usual ASCII name of a usual length is fine as it is (kv_batch_put of 100k keys).
    const bool plain = PyUnicode_Check(name) && PyUnicode_IS_ASCII(name) && PyUnicode_GET_LENGTH(name) > 0 &&
                       PyUnicode_GET_LENGTH(name) <= static_cast<Py_ssize_t>(kMaxNameBytes) &&
                       PyUnicode_FindChar(name, 0, 0, PyUnicode_GET_LENGTH(name), 1) < 0;
    if (!plain) check_name(name, parameter + "[" + std::to_string(i) + "]");
  }
  return names;
}

nb::list list_of(nb::handle values) {
  PyObject* list = PySequence_List(values.ptr());
  if (list == nullptr) throw nb::python_error();
  return nb::steal<nb::list>(list);
}

std::string type_name_of(nb::handle value) { return nb::cast<std::string>(value.type().attr("__name__")); }

std::string str_text(nb::handle value) {
  nb::object text = nb::steal(PyObject_Str(value.ptr()));
  if (!text.is_valid()) throw nb::python_error();
  return nb::cast<std::string>(text);
}

std::string repr_text(nb::handle value) { return nb::repr(value).c_str(); }

nb::handle python_attribute(const char* module, const char* name) {
  return nb::object(nb::module_::import_(module).attr(name)).release();
}

bool is_mapping(nb::handle value) {
  static CachedAttribute mapping("collections.abc", "Mapping");
  const int is = PyObject_IsInstance(value.ptr(), mapping.ptr());
  if (is < 0) throw nb::python_error();
  return is == 1;
}

void throw_argument_type_error(const std::string& message) {
  PyErr_SetString(argument_type_error_type, message.c_str());
  throw nb::python_error();
}

std::string short_repr(nb::handle value) {
  nb::str text = nb::repr(value);
  const Py_ssize_t length = PyUnicode_GET_LENGTH(text.ptr());
  if (length <= static_cast<Py_ssize_t>(kShortRepr)) return text.c_str();
  nb::str head = nb::steal<nb::str>(PyUnicode_Substring(text.ptr(), 0, kShortRepr));
  return std::string(head.c_str()) + "... (" + std::to_string(length) + " characters)";
}

void throw_wrong_type(nb::handle value, std::string_view parameter, std::string_view description) {
  throw_argument_type_error(std::string(parameter) + " must be " + std::string(description) + ", got " +
                            type_name_of(value) + " " + short_repr(value));
}

nb::object check_name(nb::handle value, std::string_view parameter) {
  if (!PyUnicode_Check(value.ptr())) throw_wrong_type(value, parameter, "a str");
  if (std::optional<std::string> problem = text_problem(value, kMaxNameBytes)) {
    throw_value_error(std::string(parameter) + " " + *problem + ", got " + short_repr(value));
  }
  return nb::borrow(value);
}

nb::object check_path(nb::handle value, std::string_view parameter) {
  nb::object path;
  if (PyUnicode_Check(value.ptr())) {
    path = nb::borrow(value);
  } else if (PyObject_HasAttrString(reinterpret_cast<PyObject*>(Py_TYPE(value.ptr())), "__fspath__") == 1) {
    path = nb::steal(PyOS_FSPath(value.ptr()));
    if (!path.is_valid()) throw nb::python_error();
  }
  if (!path.is_valid() || !PyUnicode_Check(path.ptr())) throw_wrong_type(value, parameter, "a str or an os.PathLike");
  if (std::optional<std::string> problem = text_problem(path, kMaxPathBytes)) {
    throw_value_error(std::string(parameter) + " " + *problem + ", got " + short_repr(value));
  }
  return path;
}

int64_t check_count(nb::handle value, std::string_view parameter, int64_t minimum, int64_t maximum) {
  if (!is_integer(value))
    throw_argument_type_error(std::string(parameter) + " must be an integer, got " + short_repr(value));
  nb::object integer = nb::steal(PyNumber_Index(value.ptr()));
  if (!integer.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long number = PyLong_AsLongLongAndOverflow(integer.ptr(), &overflow);
  if (overflow < 0 || (overflow == 0 && number < minimum)) {
    throw_value_error(std::string(parameter) + " must be >= " + std::to_string(minimum) + ", got " + str_text(value));
  }
  if (overflow > 0 || number > maximum) {
    throw_value_error(std::string(parameter) + " must be <= " + std::to_string(maximum) + ", got " + str_text(value));
  }
  return number;
}

// Only the exception type: the checks Python calls are seqflow/_checks.py's.
void bind_checks(nb::module_ m) {
  nb::object bases = nb::make_tuple(nb::handle(PyExc_TypeError), nb::handle(PyExc_ValueError));
  argument_type_error_type = PyErr_NewExceptionWithDoc("seqflow._checks.ArgumentTypeError",
                                                       "An argument of the wrong type.", bases.ptr(), nullptr);
  if (argument_type_error_type == nullptr) throw nb::python_error();
  m.attr("ArgumentTypeError") = nb::handle(argument_type_error_type);
}

}  // namespace seqflow::bindings
