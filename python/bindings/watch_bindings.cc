// _seqflow.client's watch types (seqflow/watch.h): one change of a watched
// partition, and one watch call's answer.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings/json_conversion.h"
#include "bindings/submodules.h"
#include "seqflow/watch.h"

namespace nb = nanobind;

namespace seqflow::bindings {

void bind_watch(nb::module_ m) {
  nb::class_<Change>(m, "Change", "One change of a watched partition's sample (Client.watch).")
      .def_prop_ro(
          "kind", [](const Change& change) { return change_kind_name(change.kind); },
          "'inserted', 'produced', 'tagged', 'cleared', 'partition_cleared' or 'resync' "
          "(changes were missed: re-read the partition with kv_list).")
      .def_ro("global_index", &Change::global_index, "The sample's global index (-1 for a whole partition).")
      .def_ro("key", &Change::key, "The sample's key; None for a keyless sample.")
      .def_prop_ro(
          "tag", [](const Change& change) -> nb::object { return change.tag ? from_value(*change.tag) : nb::none(); },
          "The sample's whole tag after the change, where it set one; else None.")
      .def("__repr__", [](const Change& change) {
        return std::string("Change(kind='") + change_kind_name(change.kind) +
               "', global_index=" + std::to_string(change.global_index) +
               ", key=" + (change.key ? "'" + *change.key + "'" : "None") + ")";
      });
  nb::class_<WatchBatch>(m, "WatchBatch", "One watch call's answer: changes since the cursor, the next cursor.")
      .def_ro("changes", &WatchBatch::changes)
      .def_ro("cursor", &WatchBatch::cursor)
      .def_ro("resync", &WatchBatch::resync);
}

}  // namespace seqflow::bindings
