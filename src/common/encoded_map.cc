#include "common/encoded_map.h"

namespace seqflow {

using Kind = MsgpackReader::Kind;

const char* type_name(Kind kind) {
  switch (kind) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return "boolean";
    case Kind::kUnsigned:
    case Kind::kSigned:
    case Kind::kFloat:
      return "number";
    case Kind::kString:
      return "string";
    case Kind::kBinary:
      return "binary";
    case Kind::kArray:
      return "array";
    case Kind::kMap:
      return "object";
  }
  return "unknown";
}

std::optional<std::vector<std::string_view>> array_elements(std::string_view bytes, size_t depth) {
  MsgpackReader reader(bytes, kMaxDecodeNesting);
  const MsgpackReader::Token array = reader.next(depth);
  if (array.kind != Kind::kArray) return std::nullopt;
  std::vector<std::string_view> out;
  out.reserve(array.number);
  for (uint64_t i = 0; i < array.number; ++i) {
    const size_t start = reader.position();
    reader.skip(depth + 1);
    out.push_back(bytes.substr(start, reader.position() - start));
  }
  return out;
}

std::vector<std::string_view> EncodedMap::elements(std::string_view key, std::string_view problem) const {
  std::optional<std::vector<std::string_view>> out = array_elements(value(key), depth_ + 1);
  if (!out) fail(key, problem);
  return std::move(*out);
}

std::vector<std::pair<std::string_view, std::string_view>> EncodedMap::members(std::string_view key,
                                                                               std::string_view problem) const {
  const std::string_view bytes = value(key);
  MsgpackReader reader(bytes, kMaxDecodeNesting);
  const MsgpackReader::Token map = reader.next(depth_ + 1);
  if (map.kind != Kind::kMap) fail(key, problem);
  std::vector<std::pair<std::string_view, std::string_view>> out;
  out.reserve(map.number);
  for (uint64_t i = 0; i < map.number; ++i) {
    const std::string_view member = reader.key();
    const size_t start = reader.position();
    reader.skip(depth_ + 2);
    out.emplace_back(member, bytes.substr(start, reader.position() - start));
  }
  return out;
}

std::vector<Value> EncodedMap::objects(std::string_view key) const {
  std::vector<Value> out;
  for (const std::string_view item : elements(key, "must be an array of maps")) {
    MsgpackReader reader(item, kMaxDecodeNesting);
    const Kind kind = reader.next(depth_ + 2).kind;
    if (kind != Kind::kMap && kind != Kind::kNull) fail(key, "must be an array of maps");
    MsgpackReader value_reader(item, kMaxDecodeNesting);
    try {
      out.push_back(read_value(value_reader, depth_ + 2));
    } catch (const Error& error) {
      fail(key, error.what());
    }
  }
  return out;
}

}  // namespace seqflow
