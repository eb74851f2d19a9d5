// Random 64-bit numbers that name things for as long as a process lives
// (a storage unit's data, a controller's incarnation, where generations start).
#pragma once

#include <cstdint>
#include <random>

namespace seqflow {

inline uint64_t random_u64() {
  std::random_device device;
  return (uint64_t{device()} << 32) ^ uint64_t { device() };
}

}  // namespace seqflow
