#include "transport/zmq_message_memory.h"

#include <gtest/gtest.h>
#include <zmq.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/block_cache.h"

namespace seqflow::transport {
namespace {

using zmq_message_memory::allocate;
using zmq_message_memory::from_block_cache;
using zmq_message_memory::reallocate;
using zmq_message_memory::release;

// The block a message's bytes lie in: libzmq keeps a small header before them.
const void* block_of(const zmq::message_t& message) {
  const auto data = reinterpret_cast<uintptr_t>(message.data());
  return reinterpret_cast<const void*>(data - data % BlockCache::kPageAlignment);
}

void fill(zmq::message_t& message) {
  auto* bytes = message.data<uint8_t>();
  for (size_t i = 0; i < message.size(); i += 4096) bytes[i] = static_cast<uint8_t>(i / 4096 * 31 + 7);
}

bool same_pattern(const zmq::message_t& message) {
  const auto* bytes = message.data<uint8_t>();
  for (size_t i = 0; i < message.size(); i += 4096) {
    if (bytes[i] != static_cast<uint8_t>(i / 4096 * 31 + 7)) return false;
  }
  return true;
}

class LibzmqAllocations : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(keep_large_zmq_messages_in_block_cache()) << "libzmq is a shared library here"; }
};

TEST_F(LibzmqAllocations, ALargeMessageLivesInACacheBlockThatTheNextOneReuses) {
  const void* first_block = nullptr;
  {
    zmq::message_t message(kLargeMessageBytes + 12345);  // zmq_msg_init_size: libzmq's malloc
    first_block = block_of(message);
    EXPECT_TRUE(from_block_cache(first_block));
  }
  EXPECT_FALSE(from_block_cache(first_block)) << "closing the message gives its block back";
  EXPECT_GE(BlockCache::instance().cached_bytes(), kLargeMessageBytes) << "kept for reuse, not unmapped";
  zmq::message_t again(kLargeMessageBytes + 12345);
  EXPECT_EQ(block_of(again), first_block) << "the next message of the size finds the block already faulted in";
}

TEST_F(LibzmqAllocations, SmallMessagesStayWithTheCLibrary) {
  const size_t cached = BlockCache::instance().cached_bytes();
  {
    zmq::message_t message(kLargeMessageBytes - 4096);
    EXPECT_FALSE(from_block_cache(block_of(message)));
  }
  EXPECT_EQ(BlockCache::instance().cached_bytes(), cached);
}

TEST_F(LibzmqAllocations, AMessageReceivedOverTcpLandsInACacheBlockIntact) {
  zmq::context_t context(1);
  zmq::socket_t receiver(context, zmq::socket_type::pair);
  zmq::socket_t sender(context, zmq::socket_type::pair);
  for (zmq::socket_t* socket : {&receiver, &sender}) {
    socket->set(zmq::sockopt::linger, 0);
    socket->set(zmq::sockopt::rcvtimeo, 20000);
    socket->set(zmq::sockopt::sndtimeo, 20000);
  }
  receiver.bind("tcp://127.0.0.1:*");
  sender.connect(receiver.get(zmq::sockopt::last_endpoint));

  const void* first_block = nullptr;
  for (int round = 0; round < 2; ++round) {
    zmq::message_t sent(size_t{40} << 20);
    fill(sent);
    ASSERT_TRUE(sender.send(sent, zmq::send_flags::none).has_value()) << "send timed out";
    zmq::message_t received;
    ASSERT_TRUE(receiver.recv(received, zmq::recv_flags::none).has_value()) << "receive timed out";
    ASSERT_EQ(received.size(), size_t{40} << 20);
    EXPECT_TRUE(same_pattern(received));
    EXPECT_TRUE(from_block_cache(block_of(received))) << "round " << round;
    if (round == 0) first_block = block_of(received);
  }
  EXPECT_NE(first_block, nullptr);
}

TEST(ZmqMessageMemory, AllocationsBelowTheThresholdComeFromTheCLibrary) {
  void* small = allocate(4096);
  ASSERT_NE(small, nullptr);
  EXPECT_FALSE(from_block_cache(small));
  std::memset(small, 1, 4096);
  release(small);  // back to free(): ASan reports a mismatch otherwise
  release(nullptr);
}

TEST(ZmqMessageMemory, ASizeTooLargeToRoundUpIsRefusedLikeMallocRefusesIt) {
  // libzmq asks for 8 + the frame size a peer wrote on the wire, and relies on malloc's NULL.
  errno = 0;
  EXPECT_EQ(allocate(SIZE_MAX - 64), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(allocate(SIZE_MAX / 2), nullptr);
}

TEST(ZmqMessageMemory, ReallocateGrowsAndMovesACacheBlockKeepingItsBytes) {
  auto* block = static_cast<uint8_t*>(allocate(kLargeMessageBytes));
  ASSERT_TRUE(from_block_cache(block));
  block[0] = 11;
  block[kLargeMessageBytes - 1] = 22;
  EXPECT_EQ(reallocate(block, kLargeMessageBytes - 100), block) << "a smaller size fits where it is";
  auto* grown = static_cast<uint8_t*>(reallocate(block, 3 * kLargeMessageBytes));
  ASSERT_NE(grown, nullptr);
  EXPECT_TRUE(from_block_cache(grown));
  EXPECT_EQ(grown[0], 11);
  EXPECT_EQ(grown[kLargeMessageBytes - 1], 22);
  EXPECT_FALSE(from_block_cache(block)) << "the old block went back to the cache";
  release(grown);
  EXPECT_FALSE(from_block_cache(grown));
}

TEST(ZmqMessageMemory, ReallocateOfACLibraryPointerStaysWithTheCLibrary) {
  auto* bytes = static_cast<char*>(std::malloc(16));
  ASSERT_NE(bytes, nullptr);
  std::strcpy(bytes, "seqflow");
  auto* grown = static_cast<char*>(reallocate(bytes, 4096));
  ASSERT_NE(grown, nullptr);
  EXPECT_STREQ(grown, "seqflow");
  EXPECT_FALSE(from_block_cache(grown));
  release(grown);
}

}  // namespace
}  // namespace seqflow::transport
