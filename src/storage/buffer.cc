// Reference-counted byte buffers: the unit of ownership of the data plane.
#include <algorithm>
#include <cstring>
#include <new>

#include <sys/mman.h>

#include "seqflow/tensor.h"
#include "storage/aligned_buffer.h"

namespace seqflow {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// Large buffers are filled right after allocation: backing them with 2 MiB
// pages instead of 4 KiB ones cuts the page faults of a put ~500x, which is
// most of its cost (the kernel gives huge pages here only when asked).
std::shared_ptr<std::byte> allocate_block(size_t size) {
  if (size < kHugePage) {
    constexpr std::align_val_t kAlign{kBufferAlignment};
    auto* bytes = static_cast<std::byte*>(::operator new(std::max<size_t>(size, 1), kAlign));
    return {bytes, [](std::byte* p) { ::operator delete(p, kAlign); }};
  }
  constexpr std::align_val_t kAlign{kHugePage};
  const size_t rounded = (size + kHugePage - 1) / kHugePage * kHugePage;
  auto* bytes = static_cast<std::byte*>(::operator new(rounded, kAlign));
  madvise(bytes, rounded, MADV_HUGEPAGE);  // a hint: failure only costs speed
  return {bytes, [](std::byte* p) { ::operator delete(p, kAlign); }};
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
