// copy.deepcopy with the plain values of custom_meta, tags and field_schema
// (dicts, lists, numbers, strings) copied in C++: BatchMeta's selections and
// joins copy one dict per sample. Anything else goes to copy.deepcopy with the
// same memo, so shared and recursive values come out as copy.deepcopy makes them.
#include "bindings/deep_copy.h"

#include "bindings/checks.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

bool is_atomic(PyObject* value) {
  if (value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) || PyFloat_CheckExact(value) ||
      PyUnicode_CheckExact(value) || PyBytes_CheckExact(value)) {
    return true;
  }
  if (!PyTuple_CheckExact(value)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); ++i) {  // a shape: copy.deepcopy returns the tuple itself
    if (!is_atomic(PyTuple_GET_ITEM(value, i))) return false;
  }
  return true;
}

// `memo` is copy.deepcopy's: id(original) -> its copy.
nb::object copy_with(nb::handle value, nb::dict& memo) {
  PyObject* original = value.ptr();
  if (is_atomic(original)) return nb::borrow(value);
  nb::object id = nb::steal(PyLong_FromVoidPtr(original));
  if (PyObject* done = PyDict_GetItemWithError(memo.ptr(), id.ptr())) return nb::borrow(done);
  if (PyErr_Occurred()) throw nb::python_error();
  if (PyDict_CheckExact(original)) {
    nb::dict out;
    memo[id] = out;
    Py_ssize_t at = 0;
    PyObject* key = nullptr;
    PyObject* item = nullptr;
    while (PyDict_Next(original, &at, &key, &item)) {
      nb::object copied_key = copy_with(key, memo);
      out[copied_key] = copy_with(item, memo);
    }
    return out;
  }
  if (PyList_CheckExact(original)) {
    nb::list out;
    memo[id] = out;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(original); ++i)
      out.append(copy_with(PyList_GET_ITEM(original, i), memo));
    return out;
  }
  static CachedAttribute deepcopy("copy", "deepcopy");
  return deepcopy(value, memo);
}

}  // namespace

nb::object deep_copy(nb::handle value) {
  if (is_atomic(value.ptr())) return nb::borrow(value);
  nb::dict memo;
  return copy_with(value, memo);
}

}  // namespace seqflow::bindings
