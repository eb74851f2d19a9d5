// _seqflow.client: the engine's client for seqflow.Client (native_client.cc),
// its samplers and its data conversion. Metadata crosses as the bound
// seqflow::BatchMeta (batch_meta_bindings.cc); data crosses as one tuple per field in
// and as views out (see tensor_conversion.h).
#include <nanobind/stl/chrono.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings/batch_meta_conversion.h"
#include "bindings/samplers.h"
#include "bindings/submodules.h"
#include "bindings/tensor_conversion.h"
#include "seqflow/client.h"
#include "seqflow/storage.h"

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
  nb::enum_<WhenFull>(m, "WhenFull", "What a put that does not fit does (StorageOptions.when_full).")
      .value("RAISE", WhenFull::kRaise, "fails 'storage full' at once")
      .value("WAIT", WhenFull::kWait, "waits until clears make room, at most its timeout");
  nb::class_<StorageOptions>(m, "StorageOptions",
                             "A storage unit's capacity (seqflow/storage.h; 0: unlimited). seqflow._capacity "
                             "builds it from a client's or a service's arguments.")
      .def(nb::init<>())
      .def_rw("max_bytes", &StorageOptions::max_bytes)
      .def_rw("max_samples", &StorageOptions::max_samples)
      .def_rw("max_bytes_per_partition", &StorageOptions::max_bytes_per_partition)
      .def_rw("max_samples_per_partition", &StorageOptions::max_samples_per_partition)
      .def_rw("when_full", &StorageOptions::when_full)
      .def_rw("high_watermark", &StorageOptions::high_watermark)
      .def_rw("low_watermark", &StorageOptions::low_watermark, nb::arg().none())
      .def_rw("wait_timeout", &StorageOptions::wait_timeout)
      .def("check", &check_storage_options, "Raises ValueError naming an option that is out of range.");
  bind_replay(m);
  bind_watch(m);
  bind_native_client(m);
}

}  // namespace seqflow::bindings
