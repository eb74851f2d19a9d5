// Reference-counted byte buffers: the unit of ownership of the data plane.
#include <algorithm>
#include <cstring>
#include <new>

#include "seqflow/tensor.h"
#include "common/aligned_buffer.h"
#include "common/block_cache.h"

namespace seqflow {

namespace {

// Small buffers come from the heap; large ones from the block cache.
std::shared_ptr<std::byte> allocate_block(size_t size) {
  if (size < BlockCache::kAlignment) {
    constexpr std::align_val_t kAlign{kBufferAlignment};
    auto* bytes = static_cast<std::byte*>(::operator new(std::max<size_t>(size, 1), kAlign));
    return {bytes, [](std::byte* p) { ::operator delete(p, kAlign); }};
  }
  size_t capacity = 0;
  std::byte* bytes = BlockCache::instance().acquire(size, &capacity);
  return {bytes, [capacity](std::byte* p) { BlockCache::instance().release(p, capacity); }};
}

}  // namespace

WritableBuffer allocate_buffer(size_t size) {
  std::shared_ptr<std::byte> block = allocate_block(size);
  std::byte* bytes = block.get();
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
