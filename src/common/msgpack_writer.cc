#include "common/msgpack_writer.h"

#include <limits>

#include "seqflow/error.h"

namespace seqflow {

void MsgpackWriter::integer(int64_t value) {
  if (value >= 0) {
    const auto number = static_cast<uint64_t>(value);
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

void MsgpackWriter::json(const nlohmann::json& value) {
  nlohmann::json::to_msgpack(value, nlohmann::detail::output_adapter<char>(bytes_));
}

}  // namespace seqflow
