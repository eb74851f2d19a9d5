// Random numbers that name things for as long as a process lives (a storage
// unit's data, a controller's incarnation, where generations start), and
// random secrets a guesser must not find (session ids, tickets).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

namespace seqflow {

inline uint64_t random_u64() {
  std::random_device device;
  return (uint64_t{device()} << 32) ^ uint64_t { device() };
}

// `Bytes` (a multiple of 4) bytes from the system's random device.
template <size_t Bytes>
std::array<uint8_t, Bytes> random_bytes() {
  static_assert(Bytes % 4 == 0);
  std::random_device device;
  std::array<uint8_t, Bytes> out;
  for (size_t i = 0; i < Bytes; i += 4) {
    const uint32_t word = device();
    std::memcpy(out.data() + i, &word, 4);
  }
  return out;
}

// A secret a guesser must not find: `Bytes` random bytes as 2 x `Bytes` hex
// digits (a storage unit's admin token, 16; the metrics token, 32).
template <size_t Bytes>
std::string random_hex_token() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (const uint8_t byte : random_bytes<Bytes>()) {
    token += kHex[byte >> 4];
    token += kHex[byte & 0xF];
  }
  return token;
}

}  // namespace seqflow
