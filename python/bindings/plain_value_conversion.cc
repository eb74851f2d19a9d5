#include "bindings/plain_value_conversion.h"

#include "core/custom_meta.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

// MsgpackDecoder reads these back and allows this depth. Returns what is not plain, if anything.
NotPlain write_at(MsgpackWriter& out, nb::handle value, size_t depth) {
  PyObject* object = value.ptr();
  if (object == Py_None) {
    out.nil();
    return {};
  }
  if (PyBool_Check(object)) {
    out.boolean(object == Py_True);
    return {};
  }
  if (PyLong_Check(object)) {
    int overflow = 0;
    const long long number = PyLong_AsLongLongAndOverflow(object, &overflow);
    if (overflow != 0) return {value};  // beyond 64 bits: pickle keeps it exact
    out.integer(number);
    return {};
  }
  if (PyFloat_Check(object)) {
    out.real(PyFloat_AS_DOUBLE(object));
    return {};
  }
  if (PyUnicode_Check(object)) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(object, &size);
    if (text == nullptr) {  // lone surrogates: not UTF-8
      PyErr_Clear();
      return {value};
    }
    out.string({text, static_cast<size_t>(size)});
    return {};
  }
  if (PyBytes_Check(object)) {
    out.binary(
        {reinterpret_cast<const std::byte*>(PyBytes_AS_STRING(object)), static_cast<size_t>(PyBytes_GET_SIZE(object))});
    return {};
  }
  const bool sequence = PyList_Check(object) || PyTuple_Check(object);
  if ((!sequence && !PyDict_Check(object)) || depth >= kMaxDecodeNesting) return {value};
  if (sequence) {
    nb::object items = nb::steal(PySequence_Fast(object, "a list or tuple"));
    const Py_ssize_t count = PySequence_Fast_GET_SIZE(items.ptr());
    PyObject** item = PySequence_Fast_ITEMS(items.ptr());
    out.array(static_cast<size_t>(count));
    for (Py_ssize_t i = 0; i < count; ++i) {
      if (NotPlain bad = write_at(out, item[i], depth + 1)) return bad;
    }
    return {};
  }
  out.map(static_cast<size_t>(PyDict_Size(object)));
  PyObject* key = nullptr;
  PyObject* item = nullptr;
  Py_ssize_t at = 0;
  while (PyDict_Next(object, &at, &key, &item)) {
    if (!PyUnicode_Check(key)) return {key, true};
    if (NotPlain bad = write_at(out, key, depth + 1)) return bad;
    if (NotPlain bad = write_at(out, item, depth + 1)) return bad;
  }
  return {};
}

}  // namespace

NotPlain write_plain_value(MsgpackWriter& out, nb::handle value) { return write_at(out, value, 0); }

}  // namespace seqflow::bindings
