#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "transport/frames.h"
#include "error_matchers.h"

namespace seqflow::transport {
namespace {

using test::throws_invalid;

std::shared_ptr<const Buffer> filled_buffer(size_t size) {
  std::vector<std::byte> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>(i * 7 + 3);
  return Buffer::copy_of(bytes);
}

TEST(Frames, FrameOfPointsIntoTheBufferAndKeepsItAlive) {
  auto buffer = filled_buffer(1 << 20);
  const std::byte* data = buffer->data;
  std::weak_ptr<const Buffer> watch = buffer;
  zmq::message_t frame = frame_of(std::move(buffer), 4096, 100000);
  EXPECT_FALSE(watch.expired()) << "the frame must hold the buffer after the caller dropped it";
  EXPECT_EQ(frame.size(), 100000u);
  EXPECT_EQ(frame.data<std::byte>(), data + 4096) << "zero copy: the frame points into the buffer";
  zmq::message_t moved = std::move(frame);
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(moved.data<std::byte>(), data + 4096);
  moved = zmq::message_t();  // ZeroMQ is done with it
  EXPECT_TRUE(watch.expired());
}

TEST(Frames, SmallRangesAreCopied) {
  auto buffer = filled_buffer(4096);
  std::weak_ptr<const Buffer> watch = buffer;
  zmq::message_t frame = frame_of(buffer, 10, kZeroCopyMinBytes - 1);
  EXPECT_NE(frame.data<std::byte>(), buffer->data + 10);
  EXPECT_EQ(std::memcmp(frame.data(), buffer->data + 10, frame.size()), 0);
  buffer.reset();
  EXPECT_TRUE(watch.expired()) << "a copied frame does not hold the buffer";
  EXPECT_EQ(frame_of(filled_buffer(8), 8, 0).size(), 0u);
  EXPECT_EQ(frame_of(nullptr, 0, 0).size(), 0u);
}

TEST(Frames, FrameOfAStringTakesItsBytesOverFromTheZeroCopySizeOn) {
  std::string large(kZeroCopyMinBytes, 'x');
  large[7] = 'y';
  const char* data = large.data();
  zmq::message_t frame = frame_of(std::move(large));
  EXPECT_EQ(frame.data<char>(), data) << "zero copy: the frame holds the string's own bytes";
  ASSERT_EQ(frame.size(), kZeroCopyMinBytes);
  EXPECT_EQ(frame.data<char>()[7], 'y');

  std::string small(kZeroCopyMinBytes - 1, 'z');
  const zmq::message_t copied = frame_of(std::move(small));
  EXPECT_EQ(as_string_view(copied), std::string(kZeroCopyMinBytes - 1, 'z'));
  EXPECT_EQ(frame_of(std::string()).size(), 0u);
}

TEST(Frames, FrameOfRejectsRangesOutsideTheBuffer) {
  auto buffer = filled_buffer(100);
  EXPECT_TRUE(throws_invalid([&] { frame_of(buffer, 101, 0); }, {"offset 101", "100 bytes"}));
  EXPECT_TRUE(throws_invalid([&] { frame_of(buffer, 50, 51); }, {"size 51"}));
  EXPECT_TRUE(throws_invalid([&] { frame_of(buffer, 1, SIZE_MAX); }, {"outside the buffer"}));
  EXPECT_TRUE(throws_invalid([&] { frame_of(nullptr, 0, 1); }, {"0 bytes"}));
}

TEST(Frames, BufferOfOwnsTheMessageWithoutCopying) {
  zmq::message_t large(1 << 16);
  std::memset(large.data(), 0x5a, large.size());
  const void* bytes = large.data();
  auto buffer = buffer_of(std::move(large));
  EXPECT_EQ(static_cast<const void*>(buffer->data), bytes);
  EXPECT_EQ(buffer->size, size_t{1} << 16);
  EXPECT_EQ(buffer->data[12345], std::byte{0x5a});
  ASSERT_NE(buffer->owner, nullptr);

  // Small messages keep their bytes inside the message object: the buffer
  // must point at the moved (heap-held) message, not at the caller's.
  auto small = buffer_of(copy_frame(std::string_view("tiny")));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(small->data), small->size), "tiny");
}

TEST(Frames, CopyFramesAndViews) {
  const zmq::message_t text = copy_frame(std::string_view("hello"));
  EXPECT_EQ(as_string_view(text), "hello");
  const std::byte raw[] = {std::byte{1}, std::byte{2}};
  const zmq::message_t binary = copy_frame(std::span<const std::byte>(raw));
  ASSERT_EQ(as_bytes(binary).size(), 2u);
  EXPECT_EQ(as_bytes(binary)[1], std::byte{2});
}

}  // namespace
}  // namespace seqflow::transport
