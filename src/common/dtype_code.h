// The numeric codes of DType, for readers of untrusted bytes (checkpoints,
// wire frames) that must reject a code before casting it to the enum.
#pragma once

#include <cstddef>
#include <cstdint>

namespace seqflow {

inline constexpr size_t kDTypeCount = 10;  // kBool .. kFloat64, in enum order

bool is_dtype_code(uint8_t code);

}  // namespace seqflow
