// custom_meta between Python and C++: lists of dicts in, MessagePack out.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <vector>

#include "seqflow/value.h"

namespace seqflow::bindings {

using OffsetsInput = nanobind::ndarray<const uint32_t, nanobind::ndim<1>, nanobind::c_contig, nanobind::device::cpu>;

// None: no entries; otherwise one dict per sample.
std::vector<Value> custom_meta_from_python(nanobind::handle value);
// One dict per sample from a batch's encoded custom_meta.
nanobind::list decode_custom_meta(nanobind::bytes bytes, const OffsetsInput& offsets);

}  // namespace seqflow::bindings
