// seqflow.BatchMeta: the engine's columns (seqflow::BatchMeta) and the
// members that hold Python objects, one bound C++ type. The class is
// batch_meta_object.cc, its selections and joins batch_meta_operations.cc,
// its constructor's checks batch_meta_arguments.cc and the columns' crossing
// between the engine and Python batch_meta_bindings.cc.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "seqflow/batch_meta.h"

namespace seqflow::bindings {

// The Python attributes beside the engine's columns of the same names: the
// engine's field_schema keeps only the names (and the per-field bits in its
// production_status); py_field_schema is the truth for everything else.
struct PyBatchMeta : BatchMeta {
  // {field: {dtype, shape, is_nested, is_non_tensor, per_sample_shapes?}}, dtypes as the caller gave them.
  nanobind::object py_field_schema;
  // int8 per sample (a writable numpy array); 1 counts as every field produced.
  nanobind::object py_production_status;
  nanobind::object py_extra_info;
  // custom_meta decoded (then it is the truth), or None while the engine's bytes are.
  nanobind::object py_custom_meta;
  // TransferQueue's _custom_backend_meta: one dict per sample, or None while every one is empty.
  nanobind::object py_backend_meta;
};

using BatchMetaClass = nanobind::class_<PyBatchMeta, BatchMeta>;

// cls.name = classmethod(function): `function` takes the class first.
template <typename Function, typename... Extra>
void def_classmethod(BatchMetaClass& cls, const char* name, Function&& function, const Extra&... extra) {
  nanobind::object bound = nanobind::cpp_function(std::forward<Function>(function), nanobind::name(name), extra...);
  nanobind::object method = nanobind::steal(PyClassMethod_New(bound.ptr()));
  if (!method.is_valid()) throw nanobind::python_error();
  nanobind::setattr(cls, name, method);
}
using BoolMatrix = nanobind::ndarray<nanobind::numpy, bool, nanobind::ndim<2>>;

// ---- batch_meta_bindings.cc: the engine's columns ----
// The engine's batch, its columns moved out of `native`; extra_info copied (None: {}).
PyBatchMeta from_native(BatchMeta&& native, nanobind::handle extra_info);
// The engine's view of `meta`: dtype names, the per-field bits of `field_produced`,
// and custom_meta: the decoded one with `custom_meta`, else the bytes (checked).
BatchMeta to_native(const PyBatchMeta& meta, bool custom_meta);
// The columns as plain Python values, and back (pickling).
nanobind::tuple columns_state(const BatchMeta& meta);
BatchMeta columns_from_state(nanobind::handle state);
// The batch's custom_meta decoded afresh (one dict per sample).
nanobind::list decode_custom_meta(const BatchMeta& meta);
// Bools as one byte each (rows x columns), the layout numpy's bool dtype has.
BoolMatrix bool_matrix(std::vector<uint8_t>&& values, size_t rows, size_t columns);
// A count argument (chunks, parts): an int >= 1, not a bool; ValueError naming it.
int64_t count_of(nanobind::handle value, const char* name);

// ---- batch_meta_arguments.cc ----
// BatchMeta(...)'s arguments checked and copied.
PyBatchMeta checked_batch_meta(nanobind::handle global_indexes, nanobind::handle partition_ids,
                               nanobind::handle field_schema, nanobind::handle production_status,
                               nanobind::handle extra_info, nanobind::handle custom_meta, nanobind::handle backend_meta,
                               nanobind::handle generations);
// One dict per sample (empty ones for None, and for [] unless not empty_is_none), each
// copied unless not copy_entries; TypeError / ValueError naming `name` otherwise.
nanobind::list dict_list(nanobind::handle values, size_t n, const std::string& name, bool copy_entries = true,
                         bool empty_is_none = true);

// ---- batch_meta_object.cc ----
void bind_batch_meta_object(nanobind::module_ m);
// (size, len(names)) row-major: sample i has field names[j]: it is in
// field_schema and its production_status is 1 or the engine said so.
std::vector<uint8_t> field_produced(const PyBatchMeta& meta, nanobind::handle names);
// sorted(field_schema): the field names.
nanobind::list sorted_names(nanobind::handle schema);
// `meta` as an instance of `type` (seqflow.BatchMeta or a subclass).
nanobind::object instance_of(nanobind::handle type, PyBatchMeta&& meta);
// custom_meta decoded (and kept) on first read.
nanobind::list custom_meta_of(PyBatchMeta& meta);
// _custom_backend_meta, made (and kept) on first read.
nanobind::list backend_meta_of(PyBatchMeta& meta);
// Per sample: production_status == 1.
std::vector<uint8_t> ready_mask(const PyBatchMeta& meta);
// production_status as a 1-D int8 array (a copy when `copy`).
nanobind::object int8_status(nanobind::handle status, bool copy);

// ---- batch_meta_operations.cc ----
// dict(mapping): a plain dict copy.
nanobind::object dict_of(nanobind::handle mapping);
// Selections, reorder, copy, concat, union, add_fields.
void bind_batch_meta_operations(BatchMetaClass& cls);
// A deep copy (custom_meta still encoded stays so).
PyBatchMeta copy_of(const PyBatchMeta& meta);

// ---- sample_view_bindings.cc ----
// BatchMeta.samples: one read-only view per sample.
nanobind::object sample_views(nanobind::handle batch);

}  // namespace seqflow::bindings
