// Fast path from Python lists of ints to int64 arrays: one pass in C++
// instead of numpy's generic object conversion.
#include <nanobind/stl/optional.h>

#include "bindings/arrays.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

// None when an item is not an exact int within int64; the caller then takes
// the general path, which explains what is wrong with which item.
std::optional<Int64Array> exact_int64(nb::handle sequence) {
  PyObject* fast = PySequence_Fast(sequence.ptr(), "expected a sequence");
  if (fast == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  nb::object owner = nb::steal(fast);
  const Py_ssize_t size = PySequence_Fast_GET_SIZE(fast);
  PyObject** items = PySequence_Fast_ITEMS(fast);
  std::vector<int64_t> values(static_cast<size_t>(size));
  for (Py_ssize_t i = 0; i < size; ++i) {
    if (!PyLong_CheckExact(items[i])) return std::nullopt;
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(items[i], &overflow);
    if (overflow != 0) return std::nullopt;
    values[static_cast<size_t>(i)] = value;
  }
  return to_numpy(std::move(values));
}

}  // namespace

void bind_array_conversion(nb::module_ m) {
  m.def("_exact_int64", &exact_int64, nb::arg("sequence"),
        "int64 array from a list or tuple of ints, or None when another path is needed");
}

}  // namespace seqflow::bindings
