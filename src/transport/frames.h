// ZeroMQ message frames and the bytes behind them: frames that point into a
// seqflow Buffer without copying, and received frames seen as Buffers.
#pragma once

#include <zmq.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "seqflow/tensor.h"

namespace seqflow::transport {

// One multipart message (or the argument / result part of one).
using Frames = std::vector<zmq::message_t>;

// Below this size frame_of copies: a zero-copy frame costs two heap
// allocations (ZeroMQ's reference count and our shared_ptr holder) and atomic
// reference counting, which is slower than a memcpy of a few hundred bytes.
inline constexpr size_t kZeroCopyMinBytes = 1024;

// ZeroMQ's receive batch (ZMQ_IN_BATCH_SIZE's default): smaller messages
// are received into a shared buffer of this size, larger ones into their own.
inline constexpr size_t kReceiveBatchBytes = 8192;

// A frame over buffer->data[offset, offset + size). From kZeroCopyMinBytes
// on, the frame points into the buffer and keeps it alive until ZeroMQ has
// sent it; smaller ranges are copied. Throws kInvalidArgument when the range
// does not lie inside the buffer.
zmq::message_t frame_of(std::shared_ptr<const Buffer> buffer, size_t offset, size_t size);

// A frame that takes the string over: from kZeroCopyMinBytes on, ZeroMQ
// sends its bytes where they lie and frees them after; smaller ones are copied.
zmq::message_t frame_of(std::string&& bytes);

// A frame holding a copy of the bytes.
zmq::message_t copy_frame(std::string_view bytes);
zmq::message_t copy_frame(std::span<const std::byte> bytes);

// The frame's bytes, valid while the frame lives and is not modified.
std::string_view as_string_view(const zmq::message_t& frame);
std::span<const std::byte> as_bytes(const zmq::message_t& frame);

// The received bytes as a Buffer, without copying: the Buffer owns the
// message, so views into it outlive the Frames it came from.
std::shared_ptr<const Buffer> buffer_of(zmq::message_t&& message);

}  // namespace seqflow::transport
