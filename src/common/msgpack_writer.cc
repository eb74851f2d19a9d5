#include "common/msgpack_writer.h"

#include <limits>

#include "seqflow/error.h"

namespace seqflow {

void MsgpackWriter::integer(int64_t value) {
  if (value >= 0) {
    unsigned_integer(static_cast<uint64_t>(value));
  } else if (value >= -32) {
    bytes_.push_back(static_cast<char>(value));  // negative fixint: the byte is the value
  } else if (value >= std::numeric_limits<int8_t>::min()) {
    lead_and<uint8_t>(0xd0, static_cast<uint8_t>(value));
  } else if (value >= std::numeric_limits<int16_t>::min()) {
    lead_and<uint16_t>(0xd1, static_cast<uint16_t>(value));
  } else if (value >= std::numeric_limits<int32_t>::min()) {
    lead_and<uint32_t>(0xd2, static_cast<uint32_t>(value));
  } else {
    lead_and<uint64_t>(0xd3, static_cast<uint64_t>(value));
  }
}

void MsgpackWriter::unsigned_integer(uint64_t number) {
  if (number <= 0x7f) {
    bytes_.push_back(static_cast<char>(number));
  } else if (number <= std::numeric_limits<uint8_t>::max()) {
    lead_and<uint8_t>(0xcc, static_cast<uint8_t>(number));
  } else if (number <= std::numeric_limits<uint16_t>::max()) {
    lead_and<uint16_t>(0xcd, static_cast<uint16_t>(number));
  } else if (number <= std::numeric_limits<uint32_t>::max()) {
    lead_and<uint32_t>(0xce, static_cast<uint32_t>(number));
  } else {
    lead_and<uint64_t>(0xcf, number);
  }
}

void MsgpackWriter::real(double value) {
  const auto narrow = static_cast<float>(value);
  // NaN fails the comparison and infinities the range: both stay float 64.
  if (value >= std::numeric_limits<float>::lowest() && value <= std::numeric_limits<float>::max() &&
      static_cast<double>(narrow) == value) {
    uint32_t bits;
    std::memcpy(&bits, &narrow, sizeof bits);
    lead_and<uint32_t>(0xca, bits);
  } else {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    lead_and<uint64_t>(0xcb, bits);
  }
}

// Recursion is bounded by the value's own depth: callers check it first
// (custom_meta's depth limit) or built it themselves.
void MsgpackWriter::value(const Value& value) {
  switch (value.type()) {
    case Value::Type::kNull:
      nil();
      return;
    case Value::Type::kBool:
      boolean(value.as_bool());
      return;
    case Value::Type::kInt:
      integer(value.as_int());
      return;
    case Value::Type::kUint:
      unsigned_integer(value.as_uint());
      return;
    case Value::Type::kDouble:
      real(value.as_double());
      return;
    case Value::Type::kString:
      string(value.as_string());
      return;
    case Value::Type::kArray:
      array(value.size());
      for (const Value& item : value.as_array()) this->value(item);
      return;
    case Value::Type::kObject:
      map(value.size());
      for (const auto& [key, item] : value.as_object()) {
        string(key);
        this->value(item);
      }
      return;
  }
}

void MsgpackWriter::size_header(size_t count, uint8_t fix_lead, size_t fix_limit, uint8_t lead8, uint8_t lead16,
                                uint8_t lead32) {
  if (count < fix_limit) {
    bytes_.push_back(static_cast<char>(fix_lead | count));
  } else if (lead8 != 0 && count <= std::numeric_limits<uint8_t>::max()) {
    lead_and<uint8_t>(lead8, static_cast<uint8_t>(count));
  } else if (count <= std::numeric_limits<uint16_t>::max()) {
    lead_and<uint16_t>(lead16, static_cast<uint16_t>(count));
  } else if (count <= std::numeric_limits<uint32_t>::max()) {
    lead_and<uint32_t>(lead32, static_cast<uint32_t>(count));
  } else {
    throw_invalid("MessagePack holds at most 2^32 - 1 bytes or elements in one value, got " + std::to_string(count));
  }
}

void MsgpackWriter::string(std::string_view text) {
  size_header(text.size(), 0xa0, 32, 0xd9, 0xda, 0xdb);
  bytes_.append(text);
}

void MsgpackWriter::binary(std::span<const std::byte> bytes) {
  size_header(bytes.size(), 0, 0, 0xc4, 0xc5, 0xc6);
  bytes_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void MsgpackWriter::binary(std::span<const std::string_view> parts) {
  size_t size = 0;
  for (std::string_view part : parts) size += part.size();
  size_header(size, 0, 0, 0xc4, 0xc5, 0xc6);
  for (std::string_view part : parts) bytes_.append(part);
}

void MsgpackWriter::array(size_t count) { size_header(count, 0x90, 16, 0, 0xdc, 0xdd); }

void MsgpackWriter::map(size_t count) { size_header(count, 0x80, 16, 0, 0xde, 0xdf); }

void MsgpackWriter::strings(std::span<const std::string> texts) {
  array(texts.size());
  for (const std::string& text : texts) string(text);
}

}  // namespace seqflow
