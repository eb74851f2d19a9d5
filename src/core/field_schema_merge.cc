#include "core/field_schema_merge.h"

#include "core/name_rule.h"
#include "seqflow/error.h"

namespace seqflow::core {
namespace {

std::string shape_text(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace

void check_schema(const std::string& field, const FieldSchema& incoming) {
  check_name(field, "field name");
  if (incoming.is_object) return;  // objects: shape is each object's byte count
  for (int64_t dim : incoming.shape) {
    if (dim >= 0) continue;
    if (dim == -1 && incoming.is_nested) continue;
    throw_invalid("field '" + field + "': shape " + shape_text(incoming.shape) + " has a negative dimension" +
                  (dim == -1 ? " but is_nested is false" : ""));
  }
}

FieldSchema merge_schema(const std::string& field, const FieldSchema& existing, const FieldSchema& incoming) {
  if (existing.is_object != incoming.is_object) {
    throw_invalid("field '" + field + "': conflict: the partition holds " +
                  (existing.is_object ? "objects" : "tensors") + ", got " +
                  (incoming.is_object ? "objects" : "tensors"));
  }
  if (existing.dtype != incoming.dtype) {
    throw_invalid("field '" + field + "': dtype conflict: the partition has " +
                  std::string(dtype_name(existing.dtype)) + ", got " + std::string(dtype_name(incoming.dtype)));
  }
  if (existing.is_object) {
    FieldSchema out = existing;
    out.is_nested = existing.is_nested || incoming.is_nested;
    return out;
  }
  const bool unknown_dims =
      (existing.is_nested && existing.shape.empty()) || (incoming.is_nested && incoming.shape.empty());
  if (unknown_dims) {
    FieldSchema out = existing;
    out.is_nested = true;
    out.shape.clear();
    return out;
  }
  if (existing.shape.size() != incoming.shape.size()) {
    throw_invalid("field '" + field + "': inconsistent shapes: the partition has " + shape_text(existing.shape) + " (" +
                  std::to_string(existing.shape.size()) + " dims), got " + shape_text(incoming.shape) + " (" +
                  std::to_string(incoming.shape.size()) + " dims)");
  }
  FieldSchema out = existing;
  out.is_nested = existing.is_nested || incoming.is_nested;
  for (size_t i = 0; i < out.shape.size(); ++i) {
    if (out.shape[i] != incoming.shape[i]) {
      out.shape[i] = -1;
      out.is_nested = true;
    }
  }
  return out;
}

}  // namespace seqflow::core
