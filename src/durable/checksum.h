// A fast streaming 64-bit checksum (xxHash64-style lanes) that catches torn or
// flipped bytes in checkpoints; not cryptographic. Gigabyte checkpoints make
// a byte-at-a-time hash (FNV) the bottleneck, hence four 8-byte lanes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace seqflow::durable {

class Checksum {
 public:
  Checksum();
  void update(std::span<const std::byte> bytes);
  uint64_t value() const;

 private:
  static constexpr size_t kStripe = 32;  // 4 lanes of 8 bytes
  void consume_stripe(const std::byte* stripe);

  std::array<uint64_t, 4> lanes_;
  std::array<std::byte, kStripe> pending_{};
  size_t pending_size_ = 0;
  uint64_t total_ = 0;
};

}  // namespace seqflow::durable
