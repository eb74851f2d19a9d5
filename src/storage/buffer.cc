// Reference-counted byte buffers: the unit of ownership of the data plane.
#include <algorithm>
#include <cstring>
#include <new>

#include "seqflow/tensor.h"
#include "storage/aligned_buffer.h"

namespace seqflow {

WritableBuffer allocate_buffer(size_t size) {
  constexpr std::align_val_t kAlign{kBufferAlignment};
  auto* bytes = static_cast<std::byte*>(::operator new(std::max<size_t>(size, 1), kAlign));
  std::shared_ptr<std::byte> block(bytes, [](std::byte* p) { ::operator delete(p, kAlign); });
  auto buffer = std::make_shared<Buffer>();
  buffer->data = bytes;
  buffer->size = size;
  buffer->owner = std::move(block);
  return {bytes, std::move(buffer)};
}

std::shared_ptr<const Buffer> Buffer::copy_of(std::span<const std::byte> bytes) {
  WritableBuffer out = allocate_buffer(bytes.size());
  if (!bytes.empty()) std::memcpy(out.data, bytes.data(), bytes.size());
  return std::move(out.buffer);
}

}  // namespace seqflow
