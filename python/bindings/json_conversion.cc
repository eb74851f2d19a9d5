// Python values <-> JSON.
#include "bindings/json_conversion.h"

#include <nanobind/stl/string.h>

#include <cmath>

#include "seqflow/error.h"

namespace nb = nanobind;

namespace seqflow::bindings {
namespace {

// `depth`: containers around `value`.
nlohmann::json to_json_at(nb::handle value, const std::string& where, size_t depth) {
  PyObject* object = value.ptr();
  if (object == Py_None) return nullptr;
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
    nlohmann::json out = nlohmann::json::array();
    size_t i = 0;
    for (nb::handle item : value) {
      out.push_back(to_json_at(item, where + "[" + std::to_string(i) + "]", depth + 1));
      ++i;
    }
    return out;
  }
  if (PyDict_Check(object)) {
    nlohmann::json out = nlohmann::json::object();
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
      const std::string name(text, static_cast<size_t>(size));
      out[name] = to_json_at(item, where + "[\"" + name + "\"]", depth + 1);
    }
    return out;
  }
  throw_invalid(where + " = " + nb::repr(value).c_str() + " has type " + nb::type_name(value.type()).c_str() +
                "; allowed are int, float, str, bool, None, list and dict");
}

}  // namespace

nlohmann::json to_json(nb::handle value, const std::string& where) { return to_json_at(value, where, 0); }

nb::object from_json(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return nb::none();
    case nlohmann::json::value_t::boolean:
      return nb::bool_(value.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return nb::int_(value.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return nb::int_(value.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return nb::float_(value.get<double>());
    case nlohmann::json::value_t::string:
      return nb::str(value.get_ref<const std::string&>().c_str(), value.get_ref<const std::string&>().size());
    case nlohmann::json::value_t::array: {
      nb::list out;
      for (const auto& item : value) out.append(from_json(item));
      return out;
    }
    case nlohmann::json::value_t::object: {
      nb::dict out;
      for (const auto& [key, item] : value.items()) out[nb::str(key.c_str(), key.size())] = from_json(item);
      return out;
    }
    default:
      return nb::none();  // binary and discarded values never come from to_json
  }
}

}  // namespace seqflow::bindings
