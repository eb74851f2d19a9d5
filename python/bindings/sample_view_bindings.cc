// BatchMeta.samples: one read-only view per sample (dicts are
// MappingProxyType), reading the batch's columns and Python attributes.
#include <nanobind/stl/string.h>

#include <string>

#include "bindings/batch_meta_object.h"
#include "bindings/checks.h"
#include "bindings/submodules.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

nb::object read_only(nb::handle dict) { return nb::steal(PyDictProxy_New(dict.ptr())); }

// One sample of a BatchMeta.
struct SampleView {
  nb::object batch;
  Py_ssize_t index;

  nb::object column(const char* name) const { return batch.attr(name)[nb::int_(index)]; }

  // Per field its schema; a nested field's "shape" is this sample's.
  nb::object fields() const {
    nb::dict out;
    nb::dict schema = nb::cast<nb::dict>(batch.attr("field_schema"));
    for (auto [name, entry] : schema) {
      nb::dict own = nb::steal<nb::dict>(PyDict_Copy(entry.ptr()));
      nb::object shapes = nb::borrow(PyDict_GetItemString(own.ptr(), "per_sample_shapes"));
      if (shapes.is_valid()) {
        PyDict_DelItemString(own.ptr(), "per_sample_shapes");
        if (!shapes.is_none()) own["shape"] = shapes[nb::int_(index)];
      }
      out[name] = read_only(own);
    }
    return read_only(out);
  }

  std::string repr() const {
    return "_SampleView(global_index=" + str_text(column("global_indexes")) +
           ", partition_id=" + repr_text(column("partition_ids")) +
           ", production_status=" + str_text(nb::int_(column("production_status"))) +
           ", fields=" + str_text(list_of(nb::object(batch.attr("field_schema")))) + ")";
  }
};

// BatchMeta.samples: indexable, sized and iterable, one view per sample.
struct SampleViewList {
  nb::object batch;

  Py_ssize_t size() const { return nb::cast<Py_ssize_t>(batch.attr("size")); }

  SampleView at(nb::handle index) const {
    const Py_ssize_t n = size();
    static CachedAttribute numpy_integer("numpy", "integer");
    const bool integer = !PyBool_Check(index.ptr()) &&
                         (PyLong_Check(index.ptr()) || PyObject_IsInstance(index.ptr(), numpy_integer.ptr()) == 1);
    int overflow = 0;
    const long long at = integer ? PyLong_AsLongLongAndOverflow(nb::int_(index).ptr(), &overflow) : 0;
    if (!integer || overflow != 0 || at < -n || at >= n) {
      throw nb::index_error(
          ("sample index " + repr_text(index) + " out of range for a batch of " + std::to_string(n)).c_str());
    }
    return {batch, static_cast<Py_ssize_t>(at < 0 ? at + n : at)};
  }
};

}  // namespace

nb::object sample_views(nb::handle batch) { return nb::cast(SampleViewList{nb::borrow(batch)}); }

void bind_sample_views(nb::module_ m) {
  nb::class_<SampleView>(m, "_SampleView", "One sample of a BatchMeta, read-only (dicts are MappingProxyType).")
      .def_prop_ro("global_index", [](const SampleView& view) { return view.column("global_indexes"); })
      .def_prop_ro("partition_id", [](const SampleView& view) { return view.column("partition_ids"); })
      .def_prop_ro("production_status",
                   [](const SampleView& view) { return nb::int_(view.column("production_status")); })
      .def_prop_ro("custom_meta", [](const SampleView& view) { return read_only(view.column("custom_meta")); })
      .def_prop_ro("fields", &SampleView::fields, "Per field its schema; a nested field's ``shape`` is this sample's.")
      .def("__repr__", &SampleView::repr);
  nb::class_<SampleViewList>(m, "_SampleViewList",
                             "BatchMeta.samples: indexable, sized and iterable, one view per sample.")
      .def("__len__", &SampleViewList::size)
      .def("__getitem__", &SampleViewList::at, nb::arg("idx").none())
      .def("__iter__", [](const SampleViewList& views) {
        nb::list all;
        for (Py_ssize_t i = 0, n = views.size(); i < n; ++i) all.append(nb::cast(SampleView{views.batch, i}));
        return nb::iter(all);
      });
}

}  // namespace seqflow::bindings
