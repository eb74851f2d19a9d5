// Tensors across the Python boundary. In: one copy of each field into a
// buffer the storage owns (so later edits of the caller's arrays do not reach
// stored data), or, with `borrow`, a buffer over the caller's array that keeps
// it alive: for a remote put, which has sent the bytes when it returns. Out:
// one copy per field (FieldOutput::fresh), or arrays that view the storage's
// buffers when the samples lie back to back in one buffer, one gathering copy
// otherwise.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "seqflow/tensor.h"

namespace seqflow::bindings {

using AnyArray = nanobind::ndarray<nanobind::ro, nanobind::c_contig, nanobind::device::cpu>;
using Int64Matrix = nanobind::ndarray<const int64_t, nanobind::ndim<2>, nanobind::c_contig, nanobind::device::cpu>;
using Int64Vector = nanobind::ndarray<const int64_t, nanobind::ndim<1>, nanobind::c_contig, nanobind::device::cpu>;

// One field of a put as python/seqflow/_columns.py hands it over (tuples,
// so that a put crosses into C++ once, with every field):
//   (field, array, borrow)                    a batch, samples along the first dimension
//   (field, values, offsets, borrow)          a jagged nested tensor's rows: sample i is
//                                             values[offsets[i]:offsets[i + 1]] (offsets[0] need not be 0)
//   (field, [array per sample])               same dtype and number of dimensions, any sizes
//   (field, [value per sample], allow_pickle) non-tensor values: strings stored as UTF-8, other
//                                             plain values (plain_value_conversion.h) as MessagePack,
//                                             anything else pickled when allow_pickle, else an error
//                                             naming the field, the sample and the type
// With borrow (a remote put, which has sent the bytes when it returns) the
// column's buffer is the caller's array, kept alive; otherwise one copy.
using DenseInput = std::tuple<std::string, AnyArray, bool>;
using JaggedInput = std::tuple<std::string, AnyArray, Int64Vector, bool>;
using RaggedInput = std::tuple<std::string, nanobind::list>;
using ObjectInput = std::tuple<std::string, nanobind::list, bool>;
using FieldInput = std::variant<DenseInput, JaggedInput, RaggedInput, ObjectInput>;

// The columns of a put's fields, in their order.
std::vector<Column> columns_of(const std::vector<FieldInput>& fields);

// Refuses a dtype seqflow does not store (`dtype`: its numpy or torch name), naming the field.
[[noreturn]] void throw_unstorable_dtype(const std::string& field, const std::string& dtype);

// The dlpack dtype of `dtype`; bfloat16 as uint16 bits (numpy has no bfloat16).
nanobind::dlpack::dtype to_dlpack(DType dtype);

// How get_data hands a field to Python.
struct FieldOutput {
  bool nested = false;        // the field's schema is nested: never one dense array
  bool fresh = true;          // arrays own a copy, never the stored bytes
  bool writable = true;       // numpy arrays writable (torch has no read-only tensors)
  bool allow_pickle = false;  // unpickle pickled values; else such a value is an error
};

// One field's values as Python sees them:
//   ("dense", array (n, *shape), dtype)       all samples of one shape
//   ("ragged", flat values, shapes (n, ndim), dtype)
//   ("list", [array per sample], dtype)        samples of differing rank
//   ("objects", [value per sample])
// bfloat16 values come as uint16 arrays with dtype "bfloat16".
nanobind::tuple field_to_python(const std::vector<SampleView>& views, const std::string& field,
                                const FieldOutput& output);

// get_data's result by field name (field_output.cc), as numpy arrays or torch
// tensors (`fmt`) viewing `native` (field_to_python's answers by name); a
// field no sample holds but `schema` (the batch's field_schema) names comes
// back empty in its schema's shape. container(kind, ...) makes the torch or
// tensordict container ("jagged", "strided", "stack") of each field that is
// not a plain array or list.
nanobind::dict fields_out(const std::vector<std::string>& fields, const nanobind::dict& native,
                          const nanobind::dict& schema, const std::string& fmt, const std::string& layout,
                          nanobind::handle container);

}  // namespace seqflow::bindings
