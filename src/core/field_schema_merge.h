// How a partition's schema of one field absorbs the schema of a new put.
#pragma once

#include <string>

#include "seqflow/controller.h"

namespace seqflow::core {

// Checks `incoming` on its own: dims are >= 0, or -1 ("varies") in a nested
// schema. Throws kInvalidArgument naming the field.
void check_schema(const std::string& field, const FieldSchema& incoming);

// The schema after `incoming` is merged into `existing`:
// - dtype and tensor-vs-object must agree (a conflict throws);
// - tensors must agree on the number of dims (else "inconsistent shapes");
// - dims that differ become -1 and the field becomes nested (variable length);
// - a nested schema with no shape means "dims unknown" and absorbs any shape.
// Per-sample shapes live with the data in storage (SampleView::shape).
FieldSchema merge_schema(const std::string& field, const FieldSchema& existing, const FieldSchema& incoming);

}  // namespace seqflow::core
