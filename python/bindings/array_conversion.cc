// User input (lists, numpy arrays, torch tensors) as int64 arrays: lengths,
// group ids, orders (seqflow._arrays.as_int64_array) and token ids
// (seqflow.pack.materialize). Errors name the parameter, the index and the value.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cmath>
#include <limits>
#include <string>

#include "bindings/arguments.h"
#include "bindings/arrays.h"
#include "bindings/checks.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

nb::object numpy(const char* name) { return nb::module_::import_("numpy").attr(name); }

nb::object contiguous(nb::handle array, const char* dtype) {
  static CachedAttribute ascontiguousarray("numpy", "ascontiguousarray");
  return ascontiguousarray(array, dtype);
}

// The items of a C-contiguous array (of T) through the buffer protocol.
template <typename T>
class Items {
 public:
  explicit Items(nb::handle array) {
    if (PyObject_GetBuffer(array.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) throw nb::python_error();
  }
  ~Items() { PyBuffer_Release(&view_); }
  Items(const Items&) = delete;
  Items& operator=(const Items&) = delete;
  size_t size() const { return static_cast<size_t>(view_.len) / sizeof(T); }
  T operator[](size_t i) const { return data()[i]; }
  const T* data() const { return static_cast<const T*>(view_.buf); }

 private:
  Py_buffer view_;
};

[[noreturn]] void throw_value_error(const std::string& message) { throw nb::value_error(message.c_str()); }

std::string dtype_kind(nb::handle array) { return nb::cast<std::string>(array.attr("dtype").attr("kind")); }
int64_t size_of(nb::handle array) { return nb::cast<int64_t>(array.attr("size")); }

// A fast path: an int64 array when every item is an exact int within int64, else None.
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

// `values` as a numpy array; a CPU torch tensor (any DLPack producer) without a copy.
nb::object to_array(nb::handle values, const std::string& name, const char* expected) {
  static CachedAttribute ndarray("numpy", "ndarray");
  if (PyObject_IsInstance(values.ptr(), ndarray.ptr()) == 1) return nb::borrow(values);
  if (nb::hasattr(values, "__dlpack__") && nb::hasattr(values, "device")) {
    if (str_text(values.attr("device")) != "cpu") {
      throw_value_error(name + " must live on the CPU, got a tensor on " + str_text(values.attr("device")));
    }
    return numpy("from_dlpack")(nb::hasattr(values, "detach") ? values.attr("detach")() : nb::borrow(values));
  }
  try {
    return numpy("asarray")(values);
  } catch (nb::python_error& error) {
    if (!error.matches(PyExc_TypeError) && !error.matches(PyExc_ValueError)) throw;
    throw_value_error(name + " must be " + expected + ": " + str_text(error.value()));
  }
}

// Refuses floats that are not whole (NaN, inf, 1.5) and those beyond int64.
void check_whole(nb::handle array, const std::string& name) {
  nb::object doubles = contiguous(array, "float64");
  const Items<double> view(doubles);
  double largest = 0;
  for (size_t i = 0; i < view.size(); ++i) {
    const double value = view[i];
    if (!std::isfinite(value) || std::floor(value) != value) {
      throw_value_error(name + "[" + std::to_string(i) + "] = " + repr_text(nb::float_(value)) + " is not an integer");
    }
    largest = std::max(largest, std::fabs(value));
  }
  if (largest >= 0x1p63) throw_value_error(name + " has values beyond the int64 range");
}

bool beyond_int64(nb::handle unsigned_array) {
  nb::object values = contiguous(unsigned_array, "uint64");
  const Items<uint64_t> view(values);
  bool beyond = false;
  for (size_t i = 0; i < view.size(); ++i) {
    beyond |= view[i] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  }
  return beyond;
}

void check_objects(nb::handle array, const std::string& name) {
  size_t index = 0;
  for (nb::handle value : array) {
    const std::string at = name + "[" + std::to_string(index++) + "] = ";
    if (PyBool_Check(value.ptr()) || !python_integer(value))
      throw_value_error(at + repr_text(value) + " is not an integer");
    int overflow = 0;
    PyLong_AsLongLongAndOverflow(python_integer(value)->ptr(), &overflow);
    if (overflow != 0) throw_value_error(at + str_text(value) + " is beyond the int64 range");
  }
}

}  // namespace

nb::object as_int64_array(nb::handle values, const std::string& name, bool allow_negative) {
  nb::object array;
  if (PyList_Check(values.ptr()) || PyTuple_Check(values.ptr())) {
    if (std::optional<Int64Array> fast = exact_int64(values)) array = nb::cast(*fast);
  }
  if (!array.is_valid()) array = to_array(values, name, "a 1-D sequence of integers");
  if (nb::cast<int>(array.attr("ndim")) != 1) {
    throw_value_error(name + " must be one-dimensional, got shape " + str_text(nb::tuple(array.attr("shape"))) + ": " +
                      short_repr(values));
  }
  const std::string kind = dtype_kind(array);
  if (kind == "f") {
    check_whole(array, name);
  } else if (kind == "u") {
    if (beyond_int64(array)) throw_value_error(name + " has values beyond the int64 range");
  } else if (kind == "O") {
    check_objects(array, name);
  } else if (kind != "i") {
    throw_value_error(name + " must hold integers, got dtype " + str_text(array.attr("dtype")));
  }
  nb::object result = contiguous(array, "int64");
  if (!allow_negative) {
    const Items<int64_t> view(result);
    // The OR of all values is negative when one is: one branch-free pass.
    int64_t any = 0;
    const int64_t* values = view.data();
    for (size_t i = 0; i < view.size(); ++i) any |= values[i];
    if (any < 0) {  // named at the first smallest value, as numpy's argmin finds it
      size_t lowest = 0;
      for (size_t i = 1; i < view.size(); ++i) lowest = view[i] < view[lowest] ? i : lowest;
      throw_value_error(name + "[" + std::to_string(lowest) + "] = " + std::to_string(view[lowest]) + " is negative; " +
                        name + " must be >= 0");
    }
  }
  return result;
}

Int64Input int64_input(nb::handle values, const std::string& name, bool allow_negative) {
  return nb::cast<Int64Input>(as_int64_array(values, name, allow_negative));
}

namespace {

// Token ids or labels as an int64 array. Float dtypes are refused even when
// the values are whole: float32 holds integers exactly only up to 2^24, so ids
// that passed through a float may already be wrong.
nb::object id_array(nb::handle values, const std::string& name) {
  nb::object source = nb::borrow(values);
  if (nb::hasattr(values, "detach")) {  // a torch tensor
    if (nb::cast<bool>(values.attr("is_floating_point")()) || nb::cast<bool>(values.attr("is_complex")())) {
      throw_value_error(name + " has dtype " + str_text(values.attr("dtype")) +
                        "; token ids and labels must be integers");
    }
    source = values.attr("detach")().attr("cpu")().attr("numpy")();
  }
  nb::object array;
  try {
    array = numpy("asarray")(source);
  } catch (nb::python_error& error) {
    if (!error.matches(PyExc_TypeError) && !error.matches(PyExc_ValueError)) throw;
    throw_value_error(name + " must be an array of integer token ids: " + str_text(error.value()));
  }
  const std::string kind = dtype_kind(array);
  if (kind != "i" && kind != "u" && size_of(array) > 0) {
    throw_value_error(name + " has dtype " + str_text(array.attr("dtype")) + "; token ids and labels must be integers");
  }
  if (kind == "u" && size_of(array) > 0 && beyond_int64(array.attr("reshape")(-1))) {
    throw_value_error(name + " holds " + str_text(nb::int_(array.attr("max")())) + ", beyond the int64 range");
  }
  return array.attr("astype")("int64", "copy"_a = false);
}

}  // namespace

nb::object token_samples(nb::handle token_ids, const std::string& name, nb::handle ragged_type) {
  if (PyObject_IsInstance(token_ids.ptr(), ragged_type.ptr()) == 1) {
    nb::object values = id_array(token_ids.attr("values"), name + ".values");
    if (nb::cast<int>(values.attr("ndim")) != 1) {
      throw_value_error(name + ".values must be one-dimensional, got shape " + str_text(values.attr("shape")));
    }
    return nb::make_tuple(values, as_int64_array(token_ids.attr("offsets"), name + ".offsets", false));
  }
  nb::object samples = nb::borrow(token_ids);
  if (nb::hasattr(token_ids, "is_nested") && PyObject_IsTrue(nb::object(token_ids.attr("is_nested")).ptr()) == 1) {
    // a torch nested tensor
    samples = token_ids.attr("unbind")();
  }
  PyObject* items = PySequence_List(samples.ptr());
  if (items == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw nb::python_error();
    PyErr_Clear();
    throw_value_error(name + " must be a list of 1-D arrays or tensors, a nested tensor or a Ragged, got " +
                      type_name_of(token_ids));
  }
  nb::list out;
  size_t index = 0;
  for (nb::handle sample : nb::steal<nb::list>(items)) {
    out.append(id_array(sample, name + "[" + std::to_string(index++) + "]").attr("reshape")(-1));
  }
  return out;
}

void bind_array_conversion(nb::module_ m) {
  m.def("_exact_int64", &exact_int64, nb::arg("sequence").none(),
        "int64 array from a list or tuple of ints, or None when another path is needed");
  m.def("as_int64_array", &as_int64_array, nb::arg("values").none(), nb::arg("name"), nb::kw_only(),
        nb::arg("allow_negative") = false,
        "A 1-D contiguous int64 view of `values`; copies only when the layout or dtype requires it. Rejects "
        "non-integers, NaN and (unless allowed) negatives, naming the parameter, the index and the value.");
  m.def("token_samples", &token_samples, nb::arg("token_ids").none(), nb::arg("name"), nb::arg("ragged_type"),
        "Sample i's token ids as int64 arrays: a list of them, or (values, offsets) of a Ragged.");
}

}  // namespace seqflow::bindings
