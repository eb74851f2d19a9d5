// _seqflow.client: the engine's client for seqflow.Client (native_client.cc),
// its samplers and its data conversion. Metadata crosses as the bound
// seqflow::BatchMeta (batch_meta_bindings.cc); data crosses as Columns in and
// as views out (see tensor_conversion.h).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings/batch_meta_conversion.h"
#include "bindings/samplers.h"
#include "bindings/submodules.h"
#include "bindings/tensor_conversion.h"
#include "seqflow/client.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

void bind_client(nb::module_ m) {
  bind_samplers(m);

  nb::class_<Column>(m, "Column", "One field's values for a batch, in a buffer the storage will own.")
      .def_prop_ro("field", [](const Column& c) { return c.field; })
      .def_prop_ro("sample_count", &Column::sample_count)
      .def_prop_ro("nbytes", [](const Column& c) { return c.buffer ? c.buffer->size : size_t{0}; })
      .def_prop_ro("is_object", [](const Column& c) { return c.is_object; });
  m.def("dense_column", &dense_column, "field"_a, "array"_a, "borrow"_a = false);
  m.def("jagged_column", &jagged_column, "field"_a, "values"_a, "offsets"_a, "borrow"_a = false);
  m.def("ragged_column", &ragged_column, "field"_a, "arrays"_a);
  m.def("object_column", &object_column, "field"_a, "items"_a, "allow_pickle"_a);
  m.def("decode_custom_meta", &decode_custom_meta, "encoded"_a, "offsets"_a,
        "One dict per sample from a batch's encoded custom_meta (MessagePack bytes and offsets).");

  nb::class_<TaskWorkload>(m, "TaskWorkload",
                           "A task's measured workload model: the fit of the micro-batch timings its ranks reported "
                           "(report_timing), or the tokens prior until enough came.")
      .def_ro("task_name", &TaskWorkload::task_name)
      .def_ro("workload", &TaskWorkload::workload)
      .def_ro("reports", &TaskWorkload::reports)
      .def_ro("fitted", &TaskWorkload::fitted)
      .def("__repr__", [](const TaskWorkload& model) {
        return "TaskWorkload(task_name='" + model.task_name + "', workload=" + model.workload.name() +
               ", reports=" + std::to_string(model.reports) + ", fitted=" + (model.fitted ? "True" : "False") + ")";
      });
  bind_native_client(m);
}

}  // namespace seqflow::bindings
