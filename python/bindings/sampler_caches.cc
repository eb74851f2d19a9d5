// The samplers' caches in TransferQueue's layouts (bindings/samplers.h):
// `_states[partition_id][task_name][dp_rank][batch_index]` (a Python
// sampler's own dict, or a built-in sampler's C++ reservations shown that
// way) and SeqlenBalancedSampler's `_balanced_cache`.
#include <nanobind/stl/string.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bindings/checks.h"
#include "bindings/samplers.h"
#include "bindings/submodules.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

nb::handle numpy_integer() {
  static CachedAttribute type("numpy", "integer");
  return type;
}

// The sampled indexes of a cached `_states` entry: a list of indexes, or a
// (sampled, consumed) pair as TransferQueue's samplers store them; None otherwise.
nb::object cached_answer(nb::handle entry) {
  nb::handle value = entry;
  if (PyTuple_Check(value.ptr()) && nb::len(value) == 2) value = PyTuple_GET_ITEM(value.ptr(), 0);
  if (!PyList_Check(value.ptr())) return nb::none();
  nb::list out;
  for (nb::handle index : value) {
    if (!PyLong_Check(index.ptr()) && PyObject_IsInstance(index.ptr(), numpy_integer().ptr()) != 1) return nb::none();
    out.append(nb::int_(index));
  }
  return out;
}

nb::object child(nb::handle node, nb::handle key) {
  return PyDict_Check(node.ptr()) ? nb::object(node.attr("get")(key)) : nb::none();
}

struct Share {
  nb::object key;  // (partition_id, task_name, batch_index)
  nb::object dp_rank;
  nb::list samples;
};

// Each reserved share of a built-in sampler's state(), by batch, then by rank.
std::vector<Share> reservations(nb::handle state) {
  std::vector<Share> out;
  for (nb::handle batch : nb::object(state.attr("get")("reservations", nb::list()))) {
    nb::object key = nb::make_tuple(batch["partition_id"], batch["task_name"], batch["batch_index"]);
    std::vector<std::pair<int64_t, nb::handle>> ranks;
    for (nb::handle share : nb::object(batch["ranks"])) ranks.emplace_back(nb::cast<int64_t>(share["dp_rank"]), share);
    std::stable_sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [rank, share] : ranks) {
      out.push_back({key, share["dp_rank"], nb::steal<nb::list>(PySequence_List(nb::object(share["samples"]).ptr()))});
    }
  }
  return out;
}

nb::handle set_default(nb::handle dict, nb::handle key, nb::handle fallback) {
  PyObject* value = PyDict_SetDefault(dict.ptr(), key.ptr(), fallback.ptr());
  if (value == nullptr) throw nb::python_error();
  return value;  // borrowed from the dict
}

}  // namespace

nb::object cached(nb::handle states, nb::handle partition_id, nb::handle task_name, nb::handle sampling_config) {
  nb::object dp_rank = sampling_config.attr("get")("dp_rank");
  if (dp_rank.is_none()) return nb::none();
  nb::object by_batch = child(child(child(states, partition_id), task_name), dp_rank);
  nb::object batch_index = sampling_config.attr("get")("batch_index");
  if (!PyDict_Check(by_batch.ptr()) || PySequence_Contains(by_batch.ptr(), batch_index.ptr()) != 1) return nb::none();
  return cached_answer(by_batch[batch_index]);
}

nb::dict reservation_states(nb::handle state, bool pairs) {
  nb::dict states;
  for (const Share& share : reservations(state)) {
    nb::handle by_task = set_default(states, PyTuple_GET_ITEM(share.key.ptr(), 0), nb::dict());
    nb::handle by_rank = set_default(by_task, PyTuple_GET_ITEM(share.key.ptr(), 1), nb::dict());
    nb::handle by_batch = set_default(by_rank, share.dp_rank, nb::dict());
    by_batch[PyTuple_GET_ITEM(share.key.ptr(), 2)] =
        pairs ? nb::object(nb::make_tuple(share.samples, nb::steal(PySequence_List(share.samples.ptr()))))
              : nb::object(share.samples);
  }
  return states;
}

nb::dict reservation_cache(nb::handle state) {
  nb::dict cache;
  for (const Share& share : reservations(state)) {
    if (PyList_Append(set_default(cache, share.key, nb::list()).ptr(), share.samples.ptr()) != 0)
      throw nb::python_error();
  }
  return cache;
}

void bind_sampler_caches(nb::module_ m) {
  m.def("cached", &cached, nb::arg("states").none(), nb::arg("partition_id").none(), nb::arg("task_name").none(),
        nb::arg("sampling_config"),
        "The answer `states` (TransferQueue's layout) holds for this caller's (dp_rank, batch_index), or None.");
}

}  // namespace seqflow::bindings
