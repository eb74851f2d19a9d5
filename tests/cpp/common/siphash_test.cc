// SipHash-2-4 against the reference vectors of its authors (key 00..0f,
// message 00..n-1), and a key or a message that differs by one bit gives
// another tag.
#include "common/siphash.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace seqflow {
namespace {

std::vector<uint8_t> counting(size_t n) {
  std::vector<uint8_t> bytes(n);
  std::iota(bytes.begin(), bytes.end(), uint8_t{0});
  return bytes;
}

TEST(SipHash, MatchesTheReferenceVectors) {
  SipKey key;
  std::iota(key.begin(), key.end(), uint8_t{0});
  EXPECT_EQ(siphash24(key, counting(0)), 0x726fdb47dd0e0e31ULL);
  EXPECT_EQ(siphash24(key, counting(1)), 0x74f839c593dc67fdULL);
  EXPECT_EQ(siphash24(key, counting(15)), 0xa129ca6149be45e5ULL);
}

TEST(SipHash, OneBitOfKeyOrMessageChangesTheTag) {
  SipKey key;
  std::iota(key.begin(), key.end(), uint8_t{0});
  const std::vector<uint8_t> message = counting(40);
  const uint64_t tag = siphash24(key, message);
  SipKey other_key = key;
  other_key[15] ^= 1;
  EXPECT_NE(siphash24(other_key, message), tag);
  std::vector<uint8_t> other_message = message;
  other_message[39] ^= 0x80;
  EXPECT_NE(siphash24(key, other_message), tag);
}

}  // namespace
}  // namespace seqflow
