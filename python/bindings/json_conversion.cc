// Python values <-> seqflow::Value.
#include "bindings/json_conversion.h"

#include <nanobind/stl/string.h>

#include <cmath>

#include "seqflow/error.h"

namespace nb = nanobind;

namespace seqflow::bindings {
namespace {

// `depth`: containers around `value`.
Value to_value_at(nb::handle value, const std::string& where, size_t depth) {
  PyObject* object = value.ptr();
  if (object == Py_None) return Value();
  if (PyBool_Check(object)) return object == Py_True;
  if (PyLong_Check(object) || (PyIndex_Check(object) && !PyFloat_Check(object))) {
    nb::object integer = nb::steal(PyNumber_Index(object));
    if (!integer.is_valid()) {
      PyErr_Clear();
      throw_invalid(where + " = " + nb::repr(value).c_str() + " is not an integer");
    }
    int overflow = 0;
    const long long signed_value = PyLong_AsLongLongAndOverflow(integer.ptr(), &overflow);
    if (overflow == 0) return static_cast<int64_t>(signed_value);
    const unsigned long long unsigned_value = PyLong_AsUnsignedLongLong(integer.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw_invalid(where + " = " + nb::repr(value).c_str() + " does not fit in 64 bits");
    }
    return static_cast<uint64_t>(unsigned_value);
  }
  if (PyFloat_Check(object)) return PyFloat_AsDouble(object);
  if (PyUnicode_Check(object)) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(object, &size);
    if (text == nullptr) {
      PyErr_Clear();
      throw_invalid(where + " is a string that cannot be encoded as UTF-8");
    }
    return std::string(text, static_cast<size_t>(size));
  }
  const bool container = PyList_Check(object) || PyTuple_Check(object) || PyDict_Check(object);
  if (container && depth >= kMaxJsonDepth) {
    throw_invalid(where + " nests containers deeper than " + std::to_string(kMaxJsonDepth) +
                  " levels (does a container hold itself?)");
  }
  if (PyList_Check(object) || PyTuple_Check(object)) {
    Value::Array out;
    out.reserve(static_cast<size_t>(PyObject_Length(object)));
    for (nb::handle item : value) {
      out.push_back(to_value_at(item, where + "[" + std::to_string(out.size()) + "]", depth + 1));
    }
    return out;
  }
  if (PyDict_Check(object)) {
    Value::Object out;
    for (auto [key, item] : nb::borrow<nb::dict>(value)) {
      if (!PyUnicode_Check(key.ptr())) {
        throw_invalid(where + " has key " + nb::repr(key).c_str() + " of type " + nb::type_name(key.type()).c_str() +
                      "; keys must be strings");
      }
      Py_ssize_t size = 0;
      const char* text = PyUnicode_AsUTF8AndSize(key.ptr(), &size);
      if (text == nullptr) {
        PyErr_Clear();
        throw_invalid(where + " has key " + nb::repr(key).c_str() + ", which cannot be encoded as UTF-8");
      }
      std::string name(text, static_cast<size_t>(size));
      Value member = to_value_at(item, where + "[\"" + name + "\"]", depth + 1);
      out.insert_or_assign(std::move(name), std::move(member));
    }
    return out;
  }
  throw_invalid(where + " = " + nb::repr(value).c_str() + " has type " + nb::type_name(value.type()).c_str() +
                "; allowed are int, float, str, bool, None, list and dict");
}

}  // namespace

Value to_value(nb::handle value, const std::string& where) { return to_value_at(value, where, 0); }

nb::object from_value(const Value& value) {
  switch (value.type()) {
    case Value::Type::kNull:
      return nb::none();
    case Value::Type::kBool:
      return nb::bool_(value.as_bool());
    case Value::Type::kInt:
      return nb::int_(value.as_int());
    case Value::Type::kUint:
      return nb::int_(value.as_uint());
    case Value::Type::kDouble:
      return nb::float_(value.as_double());
    case Value::Type::kString:
      return nb::str(value.as_string().c_str(), value.as_string().size());
    case Value::Type::kArray: {
      nb::list out;
      for (const Value& item : value.as_array()) out.append(from_value(item));
      return out;
    }
    case Value::Type::kObject: {
      nb::dict out;
      for (const auto& [key, item] : value.as_object()) out[nb::str(key.c_str(), key.size())] = from_value(item);
      return out;
    }
  }
  return nb::none();
}

}  // namespace seqflow::bindings
