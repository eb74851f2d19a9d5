// Consistency of one value's dtype, shape and byte count.
#include "storage/value_check.h"

#include "seqflow/error.h"
#include "common/checked_math.h"
#include "common/dtype_code.h"

namespace seqflow {
namespace {

std::string shape_text(const Shape& shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

}  // namespace

std::optional<std::string> value_problem(DType dtype, bool is_object, const Shape& shape, size_t nbytes) {
  if (!is_dtype_code(static_cast<uint8_t>(dtype))) {
    return "unknown dtype code " + std::to_string(static_cast<unsigned>(dtype));
  }
  if (shape.size() > kMaxRank) {
    return std::to_string(shape.size()) + " dimensions exceed the limit of " + std::to_string(kMaxRank);
  }
  if (is_object) {
    if (dtype != DType::kUInt8) {
      return "an object must have dtype uint8, not " + std::string(dtype_name(dtype));
    }
    if (shape.size() != 1 || shape[0] < 0 || static_cast<uint64_t>(shape[0]) != nbytes) {
      return "an object of " + std::to_string(nbytes) + " bytes must have shape [" + std::to_string(nbytes) +
             "], not " + shape_text(shape);
    }
    return std::nullopt;
  }
  int64_t count = 0;
  try {
    count = element_count(shape);
  } catch (const Error& error) {
    return std::string(error.what()) + " (shape " + shape_text(shape) + ")";
  }
  auto expected = checked_mul(count, static_cast<int64_t>(dtype_size(dtype)));
  if (!expected) return "shape " + shape_text(shape) + " overflows int64 bytes";
  if (static_cast<uint64_t>(*expected) != nbytes) {
    return "shape " + shape_text(shape) + " of " + std::string(dtype_name(dtype)) + " needs " +
           std::to_string(*expected) + " bytes, the value has " + std::to_string(nbytes);
  }
  return std::nullopt;
}

}  // namespace seqflow
