#include "transport/write_tag.h"

#include <array>
#include <string>

#include "common/siphash.h"
#include "seqflow/error.h"

namespace seqflow::transport {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The token's 128 bits as the key.
SipKey key_of(std::string_view token) {
  SipKey key{};
  if (token.size() != 2 * key.size()) throw_invalid("a unit's admin token must be 32 hex digits");
  for (size_t i = 0; i < key.size(); ++i) {
    const int high = hex_digit(token[2 * i]);
    const int low = hex_digit(token[2 * i + 1]);
    if (high < 0 || low < 0) throw_invalid("a unit's admin token must be 32 hex digits");
    key[i] = static_cast<uint8_t>(high * 16 + low);
  }
  return key;
}

}  // namespace

uint64_t write_tag(std::string_view unit_token, uint64_t version) {
  // A purpose prefix keeps these tags apart from any other use of the key.
  std::array<uint8_t, 22> message{'s', 'e', 'q', 'f', 'l', 'o', 'w', ' ', 'w', 'r', 'i', 't', 'e', ' '};
  for (size_t i = 0; i < 8; ++i) message[14 + i] = static_cast<uint8_t>(version >> (8 * i));
  return siphash24(key_of(unit_token), message);
}

}  // namespace seqflow::transport
