// seqflow.StreamingDataset's rules (seqflow/streaming.h) and the checks of
// its arguments, with TransferQueue's words ("must be an integer >= 1").
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bindings/checks.h"
#include "bindings/submodules.h"
#include "seqflow/batch_meta.h"
#include "seqflow/streaming.h"

namespace nb = nanobind;
using namespace nb::literals;

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

using Flags = nb::ndarray<const bool, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using FlagMatrix = nb::ndarray<const bool, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using Indexes = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

std::span<const bool> span_of(const Flags& flags) { return {flags.data(), flags.shape(0)}; }
std::span<const int64_t> span_of(const Indexes& indexes) { return {indexes.data(), indexes.shape(0)}; }

std::optional<std::string> stall_reason(const std::vector<std::string>& fields, std::optional<FlagMatrix> produced,
                                        std::optional<int64_t> left) {
  const size_t samples = produced ? produced->shape(0) : 0;
  const size_t width = samples ? produced->shape(1) : 0;
  std::unique_ptr<bool[]> has_field(new bool[width]());  // produced.any(axis=0)
  for (size_t i = 0; i < samples; ++i) {
    for (size_t f = 0; f < width; ++f) has_field[f] = has_field[f] || produced->data()[i * width + f];
  }
  return streaming::stall_reason(fields, {has_field.get(), width}, left);
}

}  // namespace

void bind_streaming(nb::module_ m) {
  using streaming::StallWatch;
  nb::class_<streaming::WorkerShare>(m, "WorkerShare",
                                     "Worker `worker` of `workers` handles batch indexes worker, worker + workers, "
                                     "...: no two workers of a rank fetch the same batch.")
      .def(nb::init<int64_t, int64_t>(), "worker"_a, "workers"_a)
      .def_prop_ro("first", &streaming::WorkerShare::first)
      .def("next", &streaming::WorkerShare::next, "index"_a);
  nb::class_<StallWatch>(m, "StallWatch",
                         "When a stream that fetched nothing checks why: after waiting `seconds` for a batch, on "
                         "each empty fetch until it has warned once.")
      .def(
          "__init__",
          [](StallWatch* self, double seconds) {
            new (self) StallWatch(
                std::chrono::duration_cast<StallWatch::Clock::duration>(std::chrono::duration<double>(seconds)));
          },
          "seconds"_a)
      .def(
          "empty_fetch", [](StallWatch& self) { return self.empty_fetch(StallWatch::Clock::now()); },
          "A fetch came back empty: True when the stream should check why.")
      .def("batch_came", &StallWatch::batch_came)
      .def("warned", &StallWatch::warned);
  m.def(
      "production_complete",
      [](const Flags& produced, std::optional<int64_t> total_samples) {
        return streaming::production_complete({.batch_size = 1, .total_samples = total_samples, .drop_last = false},
                                              span_of(produced));
      },
      "produced"_a, "total_samples"_a.none(),
      "Production is complete: total_samples samples hold every requested field, or, without total_samples, every "
      "sample of the partition does (and it has one). produced: the flags of get_production_status.");
  m.def(
      "left_to_consume",
      [](const Indexes& indexes, const Flags& produced, const Indexes& consumed_indexes, const Flags& consumed) {
        return streaming::left_to_consume(span_of(indexes), span_of(produced), span_of(consumed_indexes),
                                          span_of(consumed));
      },
      "indexes"_a, "produced"_a, "consumed_indexes"_a, "consumed"_a,
      "Produced samples the task has not consumed (get_production_status and get_consumption_status answers).");
  m.def(
      "fetch_after_production",
      [](int64_t batch_size, bool drop_last, int64_t left) {
        const streaming::LastFetch fetch = streaming::fetch_after_production(
            {.batch_size = batch_size, .total_samples = std::nullopt, .drop_last = drop_last}, left);
        return std::make_pair(fetch.batch_size, fetch.ends_if_empty);
      },
      "batch_size"_a, "drop_last"_a, "left"_a,
      "(batch size, whether an empty answer ends the rank) of the fetch once production is complete and `left` "
      "samples are left: the short last batch unless drop_last.");
  m.def(
      "micro_batch_sizes",
      [](int64_t rows, nb::handle micro_batch_size) {
        check_int_at_least(micro_batch_size, "micro_batch_size", 1);
        int overflow = 0;  // a size beyond int64 is one micro-batch
        const int64_t size = PyLong_AsLongLongAndOverflow(micro_batch_size.ptr(), &overflow);
        if (rows <= 0) return std::vector<size_t>{};
        const int64_t parts = overflow != 0 ? 1 : rows / size + (rows % size != 0 ? 1 : 0);
        return chunk_sizes(static_cast<size_t>(rows), parts);
      },
      "rows"_a, "micro_batch_size"_a.none(),
      "ceil(rows / micro_batch_size) micro-batch sizes chunk_sizes(rows, k) (7 rows at 3 -> 3, 2, 2); none for "
      "no rows.");
  m.def("stall_reason", &stall_reason, "fields"_a, "produced"_a.none(), "left"_a.none(),
        "Why a batch waited for cannot come as things stand, or None. produced: get_production_status(per_field="
        "True) flags (samples x fields); left: samples left to consume once production is complete (finite mode).");
  m.def("streaming_arguments", &streaming_arguments, nb::arg("batch_size").none(), nb::arg("micro_batch_size").none(),
        nb::arg("dp_rank").none(), nb::arg("data_fields").none(), nb::arg("partition_id").none(),
        nb::arg("task_name").none(), nb::arg("empty_batch_sleep").none(), nb::arg("total_samples").none(),
        nb::arg("drop_last").none(), nb::arg("warn_after_seconds").none(),
        "StreamingDataset's arguments checked: (data_fields as a list, empty_batch_sleep and warn_after_seconds as "
        "floats).");
}

}  // namespace seqflow::bindings
