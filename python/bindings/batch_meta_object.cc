// seqflow.BatchMeta as one bound C++ type (PyBatchMeta, batch_meta_object.h):
// its constructor, attributes, custom_meta / extra_info methods, queries,
// pickling and text. Selections and joins: batch_meta_operations.cc.
#include "bindings/batch_meta_object.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bindings/arrays.h"
#include "bindings/checks.h"
#include "bindings/deep_copy.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {
namespace {

constexpr const char* kClassDoc =
    "Metadata of a batch of samples: which samples it holds and what is known about them.\n\n"
    "TransferQueue 0.1.11's constructor, attributes and methods over seqflow's C++ BatchMeta\n"
    "(include/seqflow/batch_meta.h), which holds the columns and does the cutting and joining:\n"
    "``global_indexes``, ``partition_ids``, ``generations`` (per sample, the generation the\n"
    "controller gave its index; a stale or foreign batch is refused with ``StaleSampleError``;\n"
    "None when built by hand), which fields of each sample are produced, and custom_meta as the\n"
    "engine's MessagePack, decoded on first read. Beside them it keeps what holds Python objects:\n"
    "``field_schema`` (``{field: {dtype, shape, is_nested, is_non_tensor, per_sample_shapes?}}``,\n"
    "dtypes as the caller gave them), ``production_status`` (int8 per sample; 1 counts as every\n"
    "field produced), ``extra_info``, custom_meta once decoded (then it is the truth) and\n"
    "TransferQueue's ``_custom_backend_meta``. ``transfer_queue.metadata.BatchMeta`` is this\n"
    "class. ``chunk`` and the data's micro-batch split share one rule, ``chunk_sizes``.";

nb::list empty_dicts(size_t n) {
  nb::list out;
  for (size_t i = 0; i < n; ++i) out.append(nb::dict());
  return out;
}

nb::object schema_entry(const PyBatchMeta& self, nb::handle field_name) {
  if (PySequence_Contains(self.py_field_schema.ptr(), field_name.ptr()) != 1) {
    throw nb::key_error(("Field " + repr_text(field_name) + " not found in field_schema; it has " +
                         str_text(sorted_names(self.py_field_schema)))
                            .c_str());
  }
  return self.py_field_schema[field_name];
}

nb::list repeated(nb::handle value, size_t n) {
  nb::list out;
  for (size_t i = 0; i < n; ++i) out.append(value);
  return out;
}

bool is_ready(const PyBatchMeta& self) {
  if (self.size() == 0) return false;
  for (uint8_t ready : ready_mask(self)) {
    if (!ready) return false;
  }
  return true;
}

// The members are Python objects: a batch in its own extra_info is a cycle the collector must see.
int traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  const auto* meta = nb::inst_ptr<PyBatchMeta>(self);
  for (const nb::object* member : {&meta->py_field_schema, &meta->py_production_status, &meta->py_extra_info,
                                   &meta->py_custom_meta, &meta->py_backend_meta}) {
    Py_VISIT(member->ptr());
  }
  return 0;
}

// None rather than NULL: a finalizer in the cycle may still read the batch.
int clear(PyObject* self) {
  if (!nb::inst_ready(self)) return 0;
  auto* meta = nb::inst_ptr<PyBatchMeta>(self);
  for (nb::object* member : {&meta->py_field_schema, &meta->py_production_status, &meta->py_extra_info,
                             &meta->py_custom_meta, &meta->py_backend_meta}) {
    *member = nb::none();
  }
  return 0;
}

PyType_Slot kSlots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(traverse)}, {Py_tp_clear, reinterpret_cast<void*>(clear)}, {0, nullptr}};

void bind_members(BatchMetaClass& cls) {
  cls.def_prop_rw(
         "field_schema", [](const PyBatchMeta& self) { return self.py_field_schema; },
         [](PyBatchMeta& self, nb::object value) { self.py_field_schema = std::move(value); },
         "{field: {dtype, shape, is_nested, is_non_tensor, per_sample_shapes?}}, dtypes as the caller gave them.")
      .def_prop_rw(
          "production_status", [](const PyBatchMeta& self) { return self.py_production_status; },
          [](PyBatchMeta& self, nb::object value) { self.py_production_status = std::move(value); },
          "int8 per sample (numpy); 1 counts as every field produced.")
      .def_prop_rw(
          "extra_info", [](const PyBatchMeta& self) { return self.py_extra_info; },
          [](PyBatchMeta& self, nb::object value) { self.py_extra_info = std::move(value); },
          "Batch-level information (a dict of any objects).")
      .def_prop_rw(
          "custom_meta", [](PyBatchMeta& self) { return custom_meta_of(self); },
          [](PyBatchMeta& self, nb::handle value) {
            self.py_custom_meta = dict_list(value, self.size(), "custom_meta");
          },
          nb::arg("value").none(), "One dict per sample.")
      .def_prop_ro(
          "_custom_meta", [](const PyBatchMeta& self) { return self.py_custom_meta; },
          "custom_meta decoded (the truth then), or None while the engine's bytes are.")
      .def_prop_rw(
          "_custom_backend_meta", [](PyBatchMeta& self) { return backend_meta_of(self); },
          [](PyBatchMeta& self, nb::handle value) {
            self.py_backend_meta = dict_list(value, self.size(), "_custom_backend_meta");
          },
          nb::arg("value").none(),
          "Per sample, storage-backend metadata (TransferQueue's; seqflow's storage needs none).");
}

void bind_custom_meta_methods(BatchMetaClass& cls) {
  cls.def(
         "_changed_custom_meta", [](const PyBatchMeta& self) { return self.py_custom_meta; },
         "custom_meta when a caller may have changed it (it was decoded), else None.")
      .def(
          "get_all_custom_meta",
          [](const PyBatchMeta& self) -> nb::object {
            if (self.py_custom_meta.is_none()) return decode_custom_meta(self);
            return deep_copy(self.py_custom_meta);
          },
          "A deep copy of custom_meta (an encoded batch decodes afresh and stays encoded).")
      .def(
          "update_custom_meta",
          [](PyBatchMeta& self, nb::handle custom_meta) {
            if (custom_meta.is_none()) return;
            nb::list entries = dict_list(custom_meta, self.size(), "custom_meta", false, false);
            nb::list mine = custom_meta_of(self);
            for (size_t i = 0; i < entries.size(); ++i) mine[i].attr("update")(entries[i]);
          },
          "custom_meta"_a.none(),
          "Merges one dict per sample into custom_meta (key by key); the controller learns it at the next put "
          "or set_custom_meta.")
      .def(
          "clear_custom_meta", [](PyBatchMeta& self) { self.py_custom_meta = empty_dicts(self.size()); },
          "Empties every sample's custom_meta.");
}

void bind_extra_info_methods(BatchMetaClass& cls) {
  cls.def(
         "get_extra_info",
         [](const PyBatchMeta& self, nb::handle key, nb::handle fallback) {
           return self.py_extra_info.attr("get")(key, fallback);
         },
         "key"_a.none(), "default"_a.none() = nb::none(), "extra_info[key], or default when absent.")
      .def(
          "set_extra_info",
          [](const PyBatchMeta& self, nb::handle key, nb::handle value) {
            if (PyObject_SetItem(self.py_extra_info.ptr(), key.ptr(), value.ptr()) != 0) throw nb::python_error();
          },
          "key"_a.none(), "value"_a.none(), "Sets extra_info[key].")
      .def(
          "get_all_extra_info", [](const PyBatchMeta& self) { return deep_copy(self.py_extra_info); },
          "A deep copy of extra_info.")
      .def(
          "update_extra_info",
          [](const PyBatchMeta& self, nb::handle info) { self.py_extra_info.attr("update")(info); },
          "info_dict"_a.none(), "extra_info.update(info_dict).")
      .def(
          "remove_extra_info",
          [](const PyBatchMeta& self, nb::handle key) { return self.py_extra_info.attr("pop")(key, nb::none()); },
          "key"_a.none(), "Removes the key; its value, or None when absent.")
      .def(
          "clear_extra_info", [](const PyBatchMeta& self) { self.py_extra_info.attr("clear")(); },
          "Empties extra_info.")
      .def(
          "has_extra_info",
          [](const PyBatchMeta& self, nb::handle key) {
            const int has = PySequence_Contains(self.py_extra_info.ptr(), key.ptr());
            if (has < 0) throw nb::python_error();
            return has == 1;
          },
          "key"_a.none(), "Whether extra_info holds the key.");
}

void bind_queries(BatchMetaClass& cls) {
  cls.def_prop_ro(
         "field_names", [](const PyBatchMeta& self) { return sorted_names(self.py_field_schema); },
         "The fields, sorted.")
      .def_prop_ro("is_ready", &is_ready, "The batch has samples and every one is produced.")
      .def(
          "is_empty", [](const PyBatchMeta& self) { return self.size() == 0; }, "The batch has no samples.")
      .def_prop_ro(
          "samples", [](nb::handle self) { return sample_views(self); },
          "Per-sample read-only views: samples[i].fields[\"x\"], len(samples), iteration.")
      .def(
          "get_dtypes",
          [](const PyBatchMeta& self, nb::handle field_name) {
            return repeated(schema_entry(self, field_name).attr("get")("dtype"), self.size());
          },
          "field_name"_a.none(), "The field's dtype, once per sample.")
      .def(
          "get_shapes",
          [](const PyBatchMeta& self, nb::handle field_name) -> nb::list {
            nb::object entry = schema_entry(self, field_name);
            nb::object shapes = entry.attr("get")("per_sample_shapes");
            if (!shapes.is_none()) return list_of(shapes);
            return repeated(entry.attr("get")("shape"), self.size());
          },
          "field_name"_a.none(), "Each sample's shape of the field (per_sample_shapes when the schema has them).")
      .def(
          "_field_produced",
          [](const PyBatchMeta& self, nb::handle names) {
            const size_t count = nb::len(names);
            return bool_matrix(field_produced(self, names), self.size(), count);
          },
          "names"_a,
          "(size, len(names)) bools: sample i has field names[j]: it is in field_schema and the sample's "
          "production_status is 1 or the engine said so.")
      .def(
          "_produced_fields",
          [](const PyBatchMeta& self) {
            nb::list names = sorted_names(self.py_field_schema);
            const std::vector<uint8_t> produced = field_produced(self, names);
            nb::list out;
            for (size_t j = 0; j < names.size(); ++j) {
              bool all = true;
              for (size_t i = 0; i < self.size() && all; ++i) all = produced[i * names.size() + j] != 0;
              if (all) out.append(names[j]);
            }
            return out;
          },
          "The fields every sample has.");
}

std::string text(const PyBatchMeta& self, bool shortened) {
  const std::string ready = is_ready(self) ? "True" : "False";
  const std::string names = str_text(sorted_names(self.py_field_schema));
  if (!shortened) {
    return "BatchMeta(size=" + std::to_string(self.size()) + ", field_names=" + names + ", is_ready=" + ready +
           ", global_indexes=" + str_text(nb::cast(self.global_indexes)) +
           ", extra_info=" + str_text(self.py_extra_info) + ")";
  }
  constexpr size_t kShown = 8;
  const std::vector<int64_t> shown(self.global_indexes.begin(),
                                   self.global_indexes.begin() + std::min(self.size(), kShown));
  return "BatchMeta(size=" + std::to_string(self.size()) + ", global_indexes=" + str_text(nb::cast(shown)) +
         (self.size() > kShown ? "..." : "") + ", field_names=" + names + ", is_ready=" + ready + ")";
}

void bind_pickling_and_text(BatchMetaClass& cls) {
  // The names of __getstate__'s first entries (the columns follow): TransferQueue's
  // tests find production_status in the state by BatchMeta.__slots__, as its own
  // BatchMeta's state is its slots.
  nb::setattr(cls, "__slots__",
              nb::make_tuple("field_schema", "production_status", "extra_info", "_custom_meta", "_backend_meta"));
  cls.def("__getstate__",
          [](const PyBatchMeta& self) {
            // custom_meta still encoded stays so.
            return nb::make_tuple(self.py_field_schema, self.py_production_status, self.py_extra_info,
                                  self.py_custom_meta, self.py_backend_meta, columns_state(self));
          })
      .def("__setstate__",
           [](PyBatchMeta* self, nb::tuple state) {
             if (state.size() != 6) throw nb::value_error("a BatchMeta's state holds 6 entries");
             PyBatchMeta meta;
             static_cast<BatchMeta&>(meta) = columns_from_state(state[5]);
             meta.py_field_schema = state[0];
             meta.py_production_status = state[1];
             // Ray's zero-copy deserialisation gives read-only arrays; add_fields writes.
             static CachedAttribute ndarray("numpy", "ndarray");
             if (nb::isinstance(meta.py_production_status, ndarray) &&
                 !nb::cast<bool>(meta.py_production_status.attr("flags").attr("writeable"))) {
               meta.py_production_status = meta.py_production_status.attr("copy")();
             }
             meta.py_extra_info = state[2];
             meta.py_custom_meta = state[3];
             meta.py_backend_meta = state[4];
             new (self) PyBatchMeta(std::move(meta));
           })
      .def("__str__", [](const PyBatchMeta& self) { return text(self, false); })
      .def("__repr__", [](const PyBatchMeta& self) { return text(self, true); });
}

}  // namespace

nb::list sorted_names(nb::handle schema) {
  nb::list names = list_of(schema);
  if (PyList_Sort(names.ptr()) != 0) throw nb::python_error();
  return names;
}

nb::object instance_of(nb::handle type, PyBatchMeta&& meta) {
  nb::object out = nb::inst_alloc(type);
  new (nb::inst_ptr<PyBatchMeta>(out)) PyBatchMeta(std::move(meta));
  nb::inst_mark_ready(out);
  return out;
}

nb::list custom_meta_of(PyBatchMeta& meta) {
  if (meta.py_custom_meta.is_none()) meta.py_custom_meta = decode_custom_meta(meta);
  return nb::borrow<nb::list>(meta.py_custom_meta);
}

nb::list backend_meta_of(PyBatchMeta& meta) {
  if (meta.py_backend_meta.is_none()) meta.py_backend_meta = empty_dicts(meta.size());
  return nb::borrow<nb::list>(meta.py_backend_meta);
}

std::vector<uint8_t> ready_mask(const PyBatchMeta& meta) {
  static CachedAttribute asarray("numpy", "asarray");
  nb::object flat = asarray(meta.py_production_status).attr("reshape")(-1);
  nb::object ones = nb::steal(PyObject_RichCompare(flat.ptr(), nb::int_(1).ptr(), Py_EQ));
  if (!ones.is_valid()) throw nb::python_error();
  auto mask = nb::cast<nb::ndarray<const bool, nb::ndim<1>, nb::c_contig, nb::device::cpu>>(asarray(ones, "bool"));
  if (mask.shape(0) != meta.size()) {
    throw nb::value_error(("production_status has " + std::to_string(mask.shape(0)) + " entries for " +
                           std::to_string(meta.size()) + " samples")
                              .c_str());
  }
  const auto* bits = reinterpret_cast<const uint8_t*>(mask.data());
  return {bits, bits + mask.shape(0)};
}

nb::object int8_status(nb::handle status, bool copy) {
  static CachedAttribute array("numpy", "array");
  return array(status, "dtype"_a = "int8", "copy"_a = copy ? nb::object(nb::bool_(true)) : nb::object(nb::none()));
}

std::vector<uint8_t> field_produced(const PyBatchMeta& meta, nb::handle names) {
  nb::list listed = list_of(names);
  std::vector<std::string> fields;
  std::vector<uint8_t> known;
  for (nb::handle name : listed) {
    fields.push_back(nb::cast<std::string>(name));
    known.push_back(PySequence_Contains(meta.py_field_schema.ptr(), name.ptr()) == 1);
  }
  std::vector<uint8_t> out = meta.field_produced(fields);
  const std::vector<uint8_t> ready = ready_mask(meta);
  for (size_t i = 0; i < meta.size(); ++i) {
    for (size_t j = 0; j < fields.size(); ++j) {
      uint8_t& bit = out[i * fields.size() + j];
      bit = (bit || ready[i]) && known[j];
    }
  }
  return out;
}

void bind_batch_meta_object(nb::module_ m) {
  BatchMetaClass cls(m, "BatchMeta", kClassDoc, nb::type_slots(kSlots));
  cls.def(
      "__init__",
      [](PyBatchMeta* self, nb::handle global_indexes, nb::handle partition_ids, nb::handle field_schema,
         nb::handle production_status, nb::handle extra_info, nb::handle custom_meta, nb::handle backend_meta,
         nb::handle generations) {
        new (self) PyBatchMeta(checked_batch_meta(global_indexes, partition_ids, field_schema, production_status,
                                                  extra_info, custom_meta, backend_meta, generations));
      },
      "global_indexes"_a.none() = nb::tuple(), "partition_ids"_a.none() = nb::tuple(),
      "field_schema"_a.none() = nb::none(), "production_status"_a.none() = nb::none(),
      "extra_info"_a.none() = nb::none(), "custom_meta"_a.none() = nb::none(),
      "_custom_backend_meta"_a.none() = nb::none(), "generations"_a.none() = nb::none(),
      "A batch of these samples (global_indexes and partition_ids, one each per sample); every argument is "
      "checked and copied. production_status: one int8 per sample, or a samples x fields matrix in field_schema "
      "order; custom_meta and _custom_backend_meta: one dict per sample.");
  def_classmethod(
      cls, "empty", [](nb::handle type, nb::handle extra_info) { return type(nb::arg("extra_info") = extra_info); },
      "cls"_a, "extra_info"_a.none() = nb::none(), "A batch of no samples.");
  def_classmethod(
      cls, "_from_native",
      [](nb::handle type, BatchMeta& native, nb::handle extra_info) {
        return instance_of(type, from_native(std::move(native), extra_info));
      },
      "cls"_a, "native"_a, "extra_info"_a.none() = nb::none(),
      "The engine's batch (its columns taken over, `native` left empty); extra_info (copied) in place of none.");
  cls.def(
      "_to_native", [](const PyBatchMeta& self, bool custom_meta) { return to_native(self, custom_meta); },
      "custom_meta"_a = true,
      "The C++ batch with the engine's view of field_schema (dtype names) and the per-field bits; with "
      "custom_meta, also the decoded one.");
  bind_members(cls);
  bind_custom_meta_methods(cls);
  bind_extra_info_methods(cls);
  bind_queries(cls);
  bind_batch_meta_operations(cls);
  bind_pickling_and_text(cls);
}

}  // namespace seqflow::bindings
