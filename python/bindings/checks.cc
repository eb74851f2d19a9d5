// The argument checks of the bindings that still take Python objects
// (bindings/checks.h; seqflow/_checks.py has the same for Python).
#include "bindings/checks.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "bindings/submodules.h"

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

[[noreturn]] void throw_value_error(const std::string& message) { throw nb::value_error(message.c_str()); }

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

}  // namespace

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

// Only the exception type: the checks Python calls are seqflow/_checks.py's.
void bind_checks(nb::module_ m) {
  nb::object bases = nb::make_tuple(nb::handle(PyExc_TypeError), nb::handle(PyExc_ValueError));
  argument_type_error_type = PyErr_NewExceptionWithDoc("seqflow._checks.ArgumentTypeError",
                                                       "An argument of the wrong type.", bases.ptr(), nullptr);
  if (argument_type_error_type == nullptr) throw nb::python_error();
  m.attr("ArgumentTypeError") = nb::handle(argument_type_error_type);
}

}  // namespace seqflow::bindings
