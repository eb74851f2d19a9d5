// field_schema dicts of seqflow.BatchMeta (python/bindings/field_schema.cc).
#pragma once

#include <nanobind/nanobind.h>

namespace seqflow::bindings {

// A copy that shares nothing mutable (dtypes are kept); with `at` (not None),
// the per_sample_shapes of the samples at those positions only.
nanobind::dict copy_schema(nanobind::handle schema, nanobind::handle at);

}  // namespace seqflow::bindings
