// Checks of seqflow.StreamingDataset's arguments, with TransferQueue's
// words ("must be an integer >= 1").
#include <nanobind/stl/string.h>

#include <string>

#include "bindings/checks.h"
#include "bindings/submodules.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

[[noreturn]] void throw_value_error(const std::string& message) { throw nb::value_error(message.c_str()); }

// `left op right` as Python answers it (a TypeError for values that do not compare).
bool compare(nb::handle left, int op, double right) {
  const int truth = PyObject_RichCompareBool(left.ptr(), nb::float_(right).ptr(), op);
  if (truth < 0) throw nb::python_error();
  return truth == 1;
}

nb::object as_float(nb::handle value) {
  nb::object number = nb::steal(PyNumber_Float(value.ptr()));
  if (!number.is_valid()) throw nb::python_error();
  return number;
}

void check_int_at_least(nb::handle value, const char* name, long minimum) {
  const bool integer = PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr());
  if (!integer || compare(value, Py_LT, static_cast<double>(minimum))) {
    throw_value_error(std::string(name) + " must be an integer >= " + std::to_string(minimum) + ", got " +
                      repr_text(value));
  }
}

// (data_fields as a list, empty_batch_sleep and warn_after_seconds as floats).
nb::tuple streaming_arguments(nb::handle batch_size, nb::handle micro_batch_size, nb::handle dp_rank,
                              nb::handle data_fields, nb::handle partition_id, nb::handle task_name,
                              nb::handle empty_batch_sleep, nb::handle total_samples, nb::handle drop_last,
                              nb::handle warn_after_seconds) {
  check_int_at_least(batch_size, "batch_size", 1);
  check_int_at_least(micro_batch_size, "micro_batch_size", 1);
  check_int_at_least(dp_rank, "dp_rank", 0);
  nb::list fields;
  if (PyUnicode_Check(data_fields.ptr())) {
    fields.append(data_fields);
  } else {
    fields = nb::steal<nb::list>(PySequence_List(data_fields.ptr()));
    if (!fields.is_valid()) throw nb::python_error();
  }
  if (fields.size() == 0) throw_value_error("data_fields must name at least one field");
  if (PyObject_IsTrue(partition_id.ptr()) != 1 || PyObject_IsTrue(task_name.ptr()) != 1) {
    throw_value_error("partition_id and task_name are required, got " + repr_text(partition_id) + " and " +
                      repr_text(task_name));
  }
  if (!compare(empty_batch_sleep, Py_GE, 0)) {
    throw_value_error("empty_batch_sleep must be >= 0 seconds, got " + repr_text(empty_batch_sleep));
  }
  if (!total_samples.is_none() && (PyBool_Check(total_samples.ptr()) || compare(total_samples, Py_LT, 1))) {
    throw_value_error("total_samples must be an integer >= 1 or None, got " + repr_text(total_samples));
  }
  if (!PyBool_Check(drop_last.ptr())) throw_value_error("drop_last must be True or False, got " + repr_text(drop_last));
  const bool number = !PyBool_Check(warn_after_seconds.ptr()) &&
                      (PyLong_Check(warn_after_seconds.ptr()) || PyFloat_Check(warn_after_seconds.ptr()));
  if (!number || !compare(warn_after_seconds, Py_GT, 0)) {
    throw_value_error("warn_after_seconds must be a number > 0, got " + repr_text(warn_after_seconds));
  }
  return nb::make_tuple(fields, as_float(empty_batch_sleep), as_float(warn_after_seconds));
}

}  // namespace

void bind_streaming_arguments(nb::module_ m) {
  m.def("streaming_arguments", &streaming_arguments, nb::arg("batch_size").none(), nb::arg("micro_batch_size").none(),
        nb::arg("dp_rank").none(), nb::arg("data_fields").none(), nb::arg("partition_id").none(),
        nb::arg("task_name").none(), nb::arg("empty_batch_sleep").none(), nb::arg("total_samples").none(),
        nb::arg("drop_last").none(), nb::arg("warn_after_seconds").none(),
        "StreamingDataset's arguments checked: (data_fields as a list, empty_batch_sleep and warn_after_seconds as "
        "floats).");
}

}  // namespace seqflow::bindings
