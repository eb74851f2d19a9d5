// Fresh, writable buffers whose data is aligned for any dtype (and for SIMD
// consumers such as torch), so that views cast to T* are always aligned.
#pragma once

#include <cstddef>
#include <memory>

#include "seqflow/tensor.h"

namespace seqflow {

inline constexpr size_t kBufferAlignment = 64;

struct WritableBuffer {
  std::byte* data = nullptr;  // the same bytes as buffer->data, writable by the creator
  std::shared_ptr<const Buffer> buffer;
};

// `size` uninitialized bytes; never a null data pointer, even for size 0.
WritableBuffer allocate_buffer(size_t size);

}  // namespace seqflow
