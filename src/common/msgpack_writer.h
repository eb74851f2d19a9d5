// Writes MessagePack straight into a byte string, each value in its
// shortest form (as msgpack-python and earlier builds write it), with no
// tree in between. msgpack_reader.h reads it back; msgpack_map_writer.h
// writes a map whose members come in any order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "seqflow/value.h"

namespace seqflow {

// Containers are written as their element count followed by the elements
// (a map's as key, value pairs); the caller writes exactly that many.
class MsgpackWriter {
 public:
  // `expected_bytes`: room reserved up front, so that writing does not reallocate.
  explicit MsgpackWriter(size_t expected_bytes = 0) { bytes_.reserve(expected_bytes); }

  void nil() { bytes_.push_back('\xc0'); }
  void boolean(bool value) { bytes_.push_back(value ? '\xc3' : '\xc2'); }
  void integer(int64_t value);  // non-negative values take the unsigned forms
  void unsigned_integer(uint64_t value);
  // A float 32 when that holds `value` exactly, else a float 64 (as earlier builds wrote it).
  void real(double value);
  void string(std::string_view text);
  void binary(std::span<const std::byte> bytes);
  // One binary of the parts back to back.
  void binary(std::span<const std::string_view> parts);
  // Numbers as one binary of their little-endian bytes (this machine's order).
  template <typename T>
  void numbers(std::span<const T> values) {
    binary(std::as_bytes(values));
  }
  void array(size_t count);
  void map(size_t count);
  // An array of strings.
  void strings(std::span<const std::string> texts);
  // Objects with their members in key order.
  void value(const Value& value);
  // One value encoded already (a map writer's, a value read from a message).
  void encoded(std::string_view value) { bytes_.append(value); }

  const std::string& bytes() const { return bytes_; }
  std::string take() && { return std::move(bytes_); }

 private:
  // `lead` followed by the low sizeof(T) bytes of `value`, big-endian.
  template <typename T>
  void lead_and(uint8_t lead, T value) {
    char out[1 + sizeof(T)];
    out[0] = static_cast<char>(lead);
    for (size_t i = 0; i < sizeof(T); ++i) {
      out[1 + i] = static_cast<char>(static_cast<uint64_t>(value) >> (8 * (sizeof(T) - 1 - i)));
    }
    bytes_.append(out, sizeof out);
  }
  // The header of a string, binary, array or map of `count`: the fix form
  // below `fix_limit` (0: none), then the 8 (when `lead8` is nonzero), 16 and
  // 32-bit forms.
  void size_header(size_t count, uint8_t fix_lead, size_t fix_limit, uint8_t lead8, uint8_t lead16, uint8_t lead32);

  std::string bytes_;
};

}  // namespace seqflow
