#include "transport/frames.h"

#include <string>

#include "seqflow/error.h"

namespace seqflow::transport {
namespace {

// ZeroMQ calls this once it no longer needs the bytes, possibly from its own
// I/O thread; `hint` is the heap-held reference that kept the buffer alive.
void release_buffer(void* /*data*/, void* hint) { delete static_cast<std::shared_ptr<const Buffer>*>(hint); }

void release_string(void* /*data*/, void* hint) { delete static_cast<std::string*>(hint); }

}  // namespace

zmq::message_t frame_of(std::string&& bytes) {
  if (bytes.size() < kZeroCopyMinBytes) return copy_frame(bytes);
  auto* owned = new std::string(std::move(bytes));
  try {
    return zmq::message_t(owned->data(), owned->size(), release_string, owned);
  } catch (const zmq::error_t& error) {
    delete owned;
    throw Error(ErrorCode::kInternal, std::string("frame_of: zmq_msg_init_data failed: ") + error.what());
  }
}

zmq::message_t frame_of(std::shared_ptr<const Buffer> buffer, size_t offset, size_t size) {
  const size_t buffer_size = buffer ? buffer->size : 0;
  if (offset > buffer_size || size > buffer_size - offset) {
    throw_invalid("frame_of: range [offset " + std::to_string(offset) + ", size " + std::to_string(size) +
                  ") lies outside the buffer of " + std::to_string(buffer_size) + " bytes");
  }
  if (size == 0) return zmq::message_t();
  const std::byte* data = buffer->data + offset;
  if (size < kZeroCopyMinBytes) return zmq::message_t(data, size);

  auto* hint = new std::shared_ptr<const Buffer>(std::move(buffer));
  try {
    // ZeroMQ's API takes a non-const pointer but never writes through it.
    return zmq::message_t(const_cast<std::byte*>(data), size, release_buffer, hint);
  } catch (const zmq::error_t& error) {
    delete hint;
    throw Error(ErrorCode::kInternal, std::string("frame_of: zmq_msg_init_data failed: ") + error.what());
  }
}

zmq::message_t copy_frame(std::string_view bytes) { return zmq::message_t(bytes.data(), bytes.size()); }

zmq::message_t copy_frame(std::span<const std::byte> bytes) { return zmq::message_t(bytes.data(), bytes.size()); }

std::string_view as_string_view(const zmq::message_t& frame) { return {frame.data<char>(), frame.size()}; }

std::span<const std::byte> as_bytes(const zmq::message_t& frame) { return {frame.data<std::byte>(), frame.size()}; }

std::shared_ptr<const Buffer> buffer_of(zmq::message_t&& message) {
  // Move first, then take the address: small messages keep their bytes
  // inside the zmq_msg_t itself, so only the heap-held message's data is stable.
  auto owner = std::make_shared<zmq::message_t>(std::move(message));
  auto buffer = std::make_shared<Buffer>();
  buffer->data = owner->data<std::byte>();
  buffer->size = owner->size();
  buffer->owner = std::move(owner);
  return buffer;
}

}  // namespace seqflow::transport
