// SipHash-2-4 (Aumasson and Bernstein): a keyed hash, short and fast, whose
// 64-bit output an attacker who does not know the 128-bit key cannot predict
// or forge. Used as a message authentication code for same-host copy
// descriptions, where both ends share a key no one else saw.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace seqflow {

using SipKey = std::array<uint8_t, 16>;

uint64_t siphash24(const SipKey& key, std::span<const uint8_t> message);

}  // namespace seqflow
