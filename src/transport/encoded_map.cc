#include "transport/encoded_map.h"

namespace seqflow::transport::wire {

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

std::string_view header_bytes(const Frames& frames, size_t index, std::string_view what) {
  if (index >= frames.size()) {
    throw_invalid(std::string(what) + " needs a header frame at position " + std::to_string(index) + ", got " +
                  std::to_string(frames.size()) + " frames");
  }
  return as_string_view(frames[index]);
}

EncodedMap encoded_header(std::string_view bytes, std::string_view what,
                          std::initializer_list<std::string_view> allowed) {
  Kind kind = Kind::kNull;
  try {
    MsgpackReader reader(bytes, kMaxDecodeNesting);
    kind = reader.skip(0);
    reader.finish();
  } catch (const Error& error) {
    throw_invalid(std::string(what) + " header " + error.what());
  }
  if (kind != Kind::kMap) {
    throw_invalid(std::string(what) + " header must be a MessagePack map, got " + type_name(kind));
  }
  return EncodedMap(bytes, 0, what, allowed);
}

std::string msgpack_of(const Json& value) {
  std::string out;
  Json::to_msgpack(value, nlohmann::detail::output_adapter<char>(out));
  return out;
}

}  // namespace seqflow::transport::wire
