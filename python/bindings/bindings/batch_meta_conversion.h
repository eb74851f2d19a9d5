// BatchMeta between C++ and Python: plain dicts. global_indexes a list,
// production_status one int8 per sample (1: every field produced) and
// field_status the samples x fields bits; custom_meta stays MessagePack until
// Python reads it.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <vector>

#include <nlohmann/json.hpp>

#include "seqflow/controller.h"

namespace seqflow::bindings {

using OffsetsInput = nanobind::ndarray<const uint32_t, nanobind::ndim<1>, nanobind::c_contig, nanobind::device::cpu>;

nanobind::dict meta_to_python(BatchMeta&& meta);
// Throws kInvalidArgument on a malformed dict (shapes, custom_meta).
BatchMeta meta_from_python(nanobind::dict meta);
// None: no entries; otherwise one dict per sample.
std::vector<nlohmann::json> custom_meta_from_python(nanobind::handle value);
// One dict per sample from a batch's encoded custom_meta.
nanobind::list decode_custom_meta(nanobind::bytes bytes, const OffsetsInput& offsets);

}  // namespace seqflow::bindings
