// The one MessagePack reader for bytes from outside the process: a peer's
// wire header, a batch's custom_meta from Python, a checkpoint. Every read is
// bounds-checked and containers nest at most `max_depth` deep, so crafted
// bytes give an error, never an overrun or a stack overflow.
//
// Errors are seqflow::Error kInvalidArgument whose message completes
// "<subject> ...", naming the problem and its byte offset:
//   "is not valid MessagePack: the data ends inside a value at byte 7"
//   "nests deeper than 64 levels at byte 70"
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "seqflow/value.h"

namespace seqflow {

// Reads one token at a time; callers recurse into containers themselves,
// passing each value's depth, and build what they need (a Value, Python
// objects) without an intermediate tree.
//
// The token path is forced inline: in a recursive caller GCC otherwise keeps
// it out of line, a call and a Token through memory per value, which made
// the Python decoder (a hot path: every BatchMeta.custom_meta read) about
// 15% slower.
class MsgpackReader {
 public:
  enum class Kind : uint8_t { kNull, kBool, kUnsigned, kSigned, kFloat, kString, kBinary, kArray, kMap };
  struct Token {
    Kind kind = Kind::kNull;
    uint64_t number = 0;     // kUnsigned value, kBool 0 or 1, kArray elements, kMap pairs
    int64_t integer = 0;     // kSigned value
    double real = 0;         // kFloat value
    std::string_view bytes;  // kString or kBinary payload, pointing into the input
    int subtype = -1;        // the ext type of a kBinary; -1 for a plain bin
  };

  MsgpackReader(std::string_view bytes, size_t max_depth)
      : begin_(bytes.data()), at_(bytes.data()), end_(bytes.data() + bytes.size()), max_depth_(max_depth) {}

  // The next token, of a value inside `depth` containers (0: the top value).
  // A container's elements follow it (a map's as key() then value pairs);
  // its count is checked against the bytes left, so callers may reserve it.
  [[gnu::always_inline]] Token next(size_t depth);
  // A map key, which must be a string.
  [[gnu::always_inline]] std::string_view key();
  // Reads past one value inside `depth` containers, checking it as next()
  // does, and returns its kind.
  Kind skip(size_t depth);
  // Throws unless every byte has been read.
  void finish() const;

  size_t position() const { return static_cast<size_t>(at_ - begin_); }
  // Throws "is not valid MessagePack: <problem> at byte <at>".
  [[noreturn]] void fail(std::string_view problem, size_t at) const;

 private:
  [[noreturn]] void too_deep(const char* start) const;
  [[noreturn]] void overrun(Kind kind, uint64_t count, const char* start) const;

  size_t left() const { return static_cast<size_t>(end_ - at_); }
  [[gnu::always_inline]] void need(size_t count) const {
    if (left() < count) fail("the data ends inside a value", position());
  }
  [[gnu::always_inline]] uint8_t byte() {
    need(1);
    return static_cast<uint8_t>(*at_++);
  }
  [[gnu::always_inline]] std::string_view take(uint64_t count) {
    need(count);
    const std::string_view out(at_, count);
    at_ += count;
    return out;
  }
  // A big-endian unsigned of sizeof(T) bytes.
  template <typename T>
  [[gnu::always_inline]] T big_endian() {
    need(sizeof(T));
    uint64_t out = 0;
    for (size_t i = 0; i < sizeof(T); ++i) out = (out << 8) | static_cast<uint8_t>(at_[i]);
    at_ += sizeof(T);
    return static_cast<T>(out);
  }

  static Token scalar(Kind kind, uint64_t number) {
    Token token;
    token.kind = kind;
    token.number = number;
    return token;
  }
  static Token signed_scalar(int64_t value) {
    Token token;
    token.kind = Kind::kSigned;
    token.integer = value;
    return token;
  }
  [[gnu::always_inline]] Token payload(Kind kind, uint64_t count, int subtype = -1) {
    Token token;
    token.kind = kind;
    token.bytes = take(count);
    token.subtype = subtype;
    return token;
  }
  Token ext(uint64_t count) {
    const int subtype = byte();
    return payload(Kind::kBinary, count, subtype);
  }
  template <typename Bits, typename Float>
  Token floating() {
    const Bits bits = big_endian<Bits>();
    Float value;
    std::memcpy(&value, &bits, sizeof value);
    Token token;
    token.kind = Kind::kFloat;
    token.real = value;
    return token;
  }
  [[gnu::always_inline]] Token container(Kind kind, uint64_t count, size_t depth, const char* start) {
    if (depth >= max_depth_) too_deep(start);
    // An element takes a byte at least, a key and value two (counts are
    // 32-bit: no overflow).
    if ((kind == Kind::kMap ? 2 * count : count) > left()) overrun(kind, count, start);
    return scalar(kind, count);
  }

  const char* begin_;
  const char* at_;
  const char* end_;
  size_t max_depth_;
};

inline MsgpackReader::Token MsgpackReader::next(size_t depth) {
  const char* const start = at_;
  const uint8_t lead = byte();
  if (lead <= 0x7f) return scalar(Kind::kUnsigned, lead);
  if (lead >= 0xe0) return signed_scalar(static_cast<int8_t>(lead));
  if (lead <= 0x8f) return container(Kind::kMap, lead & 0x0f, depth, start);
  if (lead <= 0x9f) return container(Kind::kArray, lead & 0x0f, depth, start);
  if (lead <= 0xbf) return payload(Kind::kString, lead & 0x1f);
  switch (lead) {
    case 0xc0:
      return Token();
    case 0xc2:
      return scalar(Kind::kBool, 0);
    case 0xc3:
      return scalar(Kind::kBool, 1);
    case 0xc4:
      return payload(Kind::kBinary, big_endian<uint8_t>());
    case 0xc5:
      return payload(Kind::kBinary, big_endian<uint16_t>());
    case 0xc6:
      return payload(Kind::kBinary, big_endian<uint32_t>());
    case 0xc7:
      return ext(big_endian<uint8_t>());
    case 0xc8:
      return ext(big_endian<uint16_t>());
    case 0xc9:
      return ext(big_endian<uint32_t>());
    case 0xca:
      return floating<uint32_t, float>();
    case 0xcb:
      return floating<uint64_t, double>();
    case 0xcc:
      return scalar(Kind::kUnsigned, big_endian<uint8_t>());
    case 0xcd:
      return scalar(Kind::kUnsigned, big_endian<uint16_t>());
    case 0xce:
      return scalar(Kind::kUnsigned, big_endian<uint32_t>());
    case 0xcf:
      return scalar(Kind::kUnsigned, big_endian<uint64_t>());
    case 0xd0:
      return signed_scalar(static_cast<int8_t>(big_endian<uint8_t>()));
    case 0xd1:
      return signed_scalar(static_cast<int16_t>(big_endian<uint16_t>()));
    case 0xd2:
      return signed_scalar(static_cast<int32_t>(big_endian<uint32_t>()));
    case 0xd3:
      return signed_scalar(static_cast<int64_t>(big_endian<uint64_t>()));
    case 0xd4:
      return ext(1);
    case 0xd5:
      return ext(2);
    case 0xd6:
      return ext(4);
    case 0xd7:
      return ext(8);
    case 0xd8:
      return ext(16);
    case 0xd9:
      return payload(Kind::kString, big_endian<uint8_t>());
    case 0xda:
      return payload(Kind::kString, big_endian<uint16_t>());
    case 0xdb:
      return payload(Kind::kString, big_endian<uint32_t>());
    case 0xdc:
      return container(Kind::kArray, big_endian<uint16_t>(), depth, start);
    case 0xdd:
      return container(Kind::kArray, big_endian<uint32_t>(), depth, start);
    case 0xde:
      return container(Kind::kMap, big_endian<uint16_t>(), depth, start);
    case 0xdf:
      return container(Kind::kMap, big_endian<uint32_t>(), depth, start);
    default:
      fail("0xc1 is not a type", static_cast<size_t>(start - begin_));  // the one unused lead byte
  }
}

inline std::string_view MsgpackReader::key() {
  const char* const start = at_;
  const uint8_t lead = byte();
  if ((lead & 0xe0) == 0xa0) return take(lead & 0x1f);
  switch (lead) {
    case 0xd9:
      return take(big_endian<uint8_t>());
    case 0xda:
      return take(big_endian<uint16_t>());
    case 0xdb:
      return take(big_endian<uint32_t>());
    default:
      fail("a map key is not a string", static_cast<size_t>(start - begin_));
  }
}

// The value at the reader's position, inside `depth` containers, as a
// Value (a repeated key's last value wins); a binary or ext value is
// kInvalidArgument (Value holds none).
Value read_value(MsgpackReader& reader, size_t depth);
// The one value `bytes` hold.
Value msgpack_to_value(std::string_view bytes, size_t max_depth);

// Checks that `bytes` hold exactly one value, a map, without building it;
// else throws as the reader does, or "must be a MessagePack map".
void check_msgpack_map(std::string_view bytes, size_t max_depth);

}  // namespace seqflow
