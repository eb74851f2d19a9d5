// Streaming checksum: lanes of multiply-rotate rounds, then an avalanche.
#include "durable/checksum.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace seqflow::durable {
namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;

uint64_t round(uint64_t lane, uint64_t word) { return std::rotl(lane + word * kPrime2, 31) * kPrime1; }

uint64_t load_word(const std::byte* p) {
  uint64_t word;
  // memcpy: unaligned-safe. Little-endian hosts only (see checkpoint.cc).
  std::memcpy(&word, p, sizeof word);
  return word;
}

}  // namespace

Checksum::Checksum() : lanes_{kPrime1 + kPrime2, kPrime2, 0, 0 - kPrime1} {}

void Checksum::consume_stripe(const std::byte* stripe) {
  for (size_t lane = 0; lane < lanes_.size(); ++lane) {
    lanes_[lane] = round(lanes_[lane], load_word(stripe + 8 * lane));
  }
}

void Checksum::update(std::span<const std::byte> bytes) {
  if (bytes.empty()) return;  // its data() may be null, which memcpy must not see
  total_ += bytes.size();
  if (pending_size_ > 0) {
    const size_t take = std::min(kStripe - pending_size_, bytes.size());
    std::memcpy(pending_.data() + pending_size_, bytes.data(), take);
    pending_size_ += take;
    bytes = bytes.subspan(take);
    if (pending_size_ < kStripe) return;
    consume_stripe(pending_.data());
    pending_size_ = 0;
  }
  while (bytes.size() >= kStripe) {
    consume_stripe(bytes.data());
    bytes = bytes.subspan(kStripe);
  }
  if (!bytes.empty()) std::memcpy(pending_.data(), bytes.data(), bytes.size());
  pending_size_ = bytes.size();
}

uint64_t Checksum::value() const {
  uint64_t h = std::rotl(lanes_[0], 1) + std::rotl(lanes_[1], 7) + std::rotl(lanes_[2], 12) + std::rotl(lanes_[3], 18);
  h ^= total_;
  for (size_t i = 0; i < pending_size_; ++i) {
    h = std::rotl(h ^ (static_cast<uint64_t>(pending_[i]) * kPrime1), 11) * kPrime2;
  }
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime1;
  return h ^ (h >> 32);
}

}  // namespace seqflow::durable
