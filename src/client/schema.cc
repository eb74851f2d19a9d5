// The field schema a column implies. Variable-length fields are nested with
// -1 in the dimensions that differ between samples (the controller's
// convention), or with an empty shape when the samples differ in rank.
#include <algorithm>

#include "seqflow/client.h"

namespace seqflow {

FieldSchema schema_of(const Column& column) {
  column.validate();
  FieldSchema schema;
  schema.dtype = column.dtype;
  schema.is_object = column.is_object;
  if (column.is_object || column.shapes.empty()) return schema;  // an object's shape is its size
  const Shape& first = column.shapes.front();
  schema.shape = first;
  for (const Shape& shape : column.shapes) {
    if (shape.size() != first.size()) {
      schema.is_nested = true;
      schema.shape.clear();
      return schema;
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] != schema.shape[d]) {
        schema.shape[d] = -1;
        schema.is_nested = true;
      }
    }
  }
  return schema;
}

}  // namespace seqflow
