// extra_info of joined batches (BatchMeta.concat, KVBatchMeta.concat): the
// union of the parts' dicts, whose values may be any objects (arrays and
// tensors compare element by element).
#include "bindings/extra_info.h"

#include <nanobind/stl/string.h>

#include <string>

#include "bindings/checks.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

// Same type and equal, never an ambiguous truth value.
bool values_equal(nb::handle a, nb::handle b) {
  if (!a.type().is(b.type())) return false;
  static CachedAttribute ndarray("numpy", "ndarray");
  if (PyObject_IsInstance(a.ptr(), ndarray.ptr()) == 1) {
    static CachedAttribute array_equal("numpy", "array_equal");
    return nb::cast<bool>(array_equal(a, b));
  }
  const bool torch = nb::cast<std::string>(a.type().attr("__module__")).starts_with("torch");
  if (torch && nb::hasattr(a, "equal")) return nb::cast<bool>(nb::bool_(a.attr("equal")(b)));
  PyObject* same = PyObject_RichCompare(a.ptr(), b.ptr(), Py_EQ);
  const int truth = same == nullptr ? -1 : PyObject_IsTrue(same);
  Py_XDECREF(same);
  if (truth < 0) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError) &&
        !PyErr_ExceptionMatches(PyExc_RuntimeError)) {
      throw nb::python_error();
    }
    PyErr_Clear();
    return false;
  }
  return truth == 1;
}

}  // namespace

// The union of the chunks' extra_info; a key with different values in two
// chunks raises ValueError.
nb::dict merged_extra_info(nb::list infos, const std::string& owner) {
  bool differ = false;
  for (size_t i = 1; i < infos.size(); ++i) {
    nb::object keys = nb::steal(PySet_New(infos[i].ptr()));
    nb::object first = nb::steal(PySet_New(infos[0].ptr()));
    if (!keys.is_valid() || !first.is_valid()) throw nb::python_error();
    differ = differ || !keys.equal(first);
  }
  if (differ) {
    nb::module_::import_("logging")
        .attr("getLogger")("seqflow.batch_meta")
        .attr("warning")("%s.concat: extra_info key sets differ across chunks; taking the union of keys", owner);
  }
  nb::dict merged;
  for (size_t i = 0; i < infos.size(); ++i) {
    for (nb::handle pair : nb::object(infos[i].attr("items")())) {
      nb::object key = pair[0];
      nb::object value = pair[1];
      if (!merged.contains(key)) {
        merged[key] = value;
      } else if (!values_equal(merged[key], value)) {
        throw nb::value_error((owner + ".concat: extra_info key " + repr_text(key) +
                               " has conflicting values across chunks and cannot be merged: " + repr_text(merged[key]) +
                               " and, in chunk[" + std::to_string(i) + "], " + repr_text(value))
                                  .c_str());
      }
    }
  }
  return merged;
}

}  // namespace seqflow::bindings
