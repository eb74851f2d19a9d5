#include "common/siphash.h"

#include <bit>
#include <cstring>

namespace seqflow {
namespace {

uint64_t load_le(const uint8_t* bytes, size_t size) {
  uint64_t value = 0;
  for (size_t i = 0; i < size; ++i) value |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  return value;
}

struct State {
  uint64_t v0, v1, v2, v3;

  void round() {
    v0 += v1;
    v1 = std::rotl(v1, 13);
    v1 ^= v0;
    v0 = std::rotl(v0, 32);
    v2 += v3;
    v3 = std::rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = std::rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = std::rotl(v1, 17);
    v1 ^= v2;
    v2 = std::rotl(v2, 32);
  }
  void absorb(uint64_t word) {
    v3 ^= word;
    round();
    round();
    v0 ^= word;
  }
};

}  // namespace

uint64_t siphash24(const SipKey& key, std::span<const uint8_t> message) {
  const uint64_t k0 = load_le(key.data(), 8);
  const uint64_t k1 = load_le(key.data() + 8, 8);
  State state{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL, k0 ^ 0x6c7967656e657261ULL,
              k1 ^ 0x7465646279746573ULL};
  const size_t whole = message.size() / 8 * 8;
  for (size_t i = 0; i < whole; i += 8) state.absorb(load_le(message.data() + i, 8));
  const uint64_t last =
      (static_cast<uint64_t>(message.size()) << 56) | load_le(message.data() + whole, message.size() - whole);
  state.absorb(last);
  state.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) state.round();
  return state.v0 ^ state.v1 ^ state.v2 ^ state.v3;
}

}  // namespace seqflow
