// field_schema dicts of seqflow.BatchMeta (python/bindings/field_schema.cc).
#pragma once

#include <nanobind/nanobind.h>

namespace seqflow::bindings {

// "float32" for torch.float32, np.float32, "float32" or "torch.float32";
// other spellings ("torch.float") as they are, for the engine to read.
nanobind::object dtype_name(nanobind::handle dtype);
// (sample count, field_schema) of a TensorDict or a dict of fields (add_fields).
nanobind::tuple schema_of(nanobind::handle data);
// The schema of joined batches (a list of BatchMeta): the first part's; a
// field nested in any part is nested, and per_sample_shapes are joined when
// any part has them.
nanobind::dict concat_schema(nanobind::handle parts);
// A copy that shares nothing mutable (dtypes are kept); with `at` (not None),
// the per_sample_shapes of the samples at those positions only.
nanobind::dict copy_schema(nanobind::handle schema, nanobind::handle at);

}  // namespace seqflow::bindings
