// _seqflow.client: the engine's client for seqflow.Client (native_client.cc),
// its samplers and its data conversion. Metadata crosses as the bound
// seqflow::BatchMeta (batch_meta_bindings.cc); data crosses as one tuple per field in
// and as views out (see tensor_conversion.h).
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
  bind_replay(m);
  bind_native_client(m);
}

}  // namespace seqflow::bindings
