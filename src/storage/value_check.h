// The one consistency rule of a stored value (dtype, shape and byte count
// agree), shared by columns from callers and records from checkpoints.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "seqflow/limits.h"
#include "seqflow/tensor.h"

namespace seqflow {

// What is wrong with a value of `nbytes` bytes, or nullopt when it is
// consistent. Tensors: nbytes == element_count(shape) * dtype_size(dtype).
// Objects: dtype uint8 and shape {nbytes}. At most kMaxRank dimensions.
std::optional<std::string> value_problem(DType dtype, bool is_object, const Shape& shape, size_t nbytes);

}  // namespace seqflow
