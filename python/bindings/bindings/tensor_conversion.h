// Tensors across the Python boundary. In: one copy of each field into a
// buffer the storage owns (so later edits of the caller's arrays do not reach
// stored data), or, with `borrow`, a buffer over the caller's array that keeps
// it alive: for a remote put, which has sent the bytes when it returns. Out:
// arrays that view the storage's buffers when the samples lie back to back in
// one buffer, one gathering copy otherwise.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>
#include <vector>

#include "seqflow/tensor.h"

namespace seqflow::bindings {

using AnyArray = nanobind::ndarray<nanobind::ro, nanobind::c_contig, nanobind::device::cpu>;
using Int64Matrix = nanobind::ndarray<const int64_t, nanobind::ndim<2>, nanobind::c_contig,
                                      nanobind::device::cpu>;

// A batch with the samples along the first dimension.
Column dense_column(const std::string& field, const AnyArray& array, bool borrow);
// Samples of varying shape stored back to back in `values`; shapes[i] is
// sample i's shape.
Column packed_column(const std::string& field, const AnyArray& values, const Int64Matrix& shapes,
                     bool borrow);
// One array per sample: same dtype and number of dimensions, any sizes.
Column ragged_column(const std::string& field, nanobind::handle arrays);
// Strings (stored as UTF-8) and other objects (stored pickled); get tells
// them apart by the first byte, since a pickle starts with 0x80, which no
// UTF-8 text does.
Column object_column(const std::string& field, nanobind::handle items);

// One field's values as Python sees them:
//   ("dense", array (n, *shape), dtype)       all samples of one shape
//   ("ragged", flat values, shapes (n, ndim), dtype)
//   ("list", [array per sample], dtype)        samples of differing rank
//   ("objects", [str or unpickled object])
// bfloat16 values come as uint16 arrays with dtype "bfloat16". Arrays are
// read-only unless `writable`.
nanobind::tuple field_to_python(const std::vector<SampleView>& views, bool nested, bool writable);

}  // namespace seqflow::bindings
