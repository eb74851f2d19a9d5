// The field schema a column implies.
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
  const bool same = std::all_of(column.shapes.begin(), column.shapes.end(),
                                [&first](const Shape& shape) { return shape == first; });
  if (same) {
    schema.shape = first;
  } else {
    schema.is_nested = true;
  }
  return schema;
}

}  // namespace seqflow
