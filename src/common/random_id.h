// Random numbers that name things for as long as a process lives (a storage
// unit's data, a controller's incarnation, where generations start), and
// random secrets a guesser must not find (session ids, tickets).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <random>

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

}  // namespace seqflow
