#include "common/msgpack_reader.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::wire {

zmq::message_t header_frame(const MsgpackMapWriter& header) { return frame_of(header.bytes()); }

std::string request_name(std::string_view op) { return std::string(op) + " request"; }
std::string reply_name(std::string_view op) { return std::string(op) + " reply"; }

Frames empty_message() { return header_message(MsgpackMapWriter()); }

void read_empty_message(const Frames& frames, std::string_view what) { read_header(frames, 0, what, {}); }

std::string_view header_bytes(const Frames& frames, size_t index, std::string_view what) {
  if (index >= frames.size()) {
    throw_invalid(std::string(what) + " needs a header frame at position " + std::to_string(index) + ", got " +
                  std::to_string(frames.size()) + " frames");
  }
  return as_string_view(frames[index]);
}

EncodedMap encoded_header(std::string_view bytes, std::string_view what,
                          std::initializer_list<std::string_view> allowed) {
  MsgpackReader::Kind kind = MsgpackReader::Kind::kNull;
  try {
    MsgpackReader reader(bytes, kMaxDecodeNesting);
    kind = reader.skip(0);
    reader.finish();
  } catch (const Error& error) {
    throw_invalid(std::string(what) + " header " + error.what());
  }
  if (kind != MsgpackReader::Kind::kMap) {
    throw_invalid(std::string(what) + " header must be a MessagePack map, got " + type_name(kind));
  }
  return EncodedMap(bytes, 0, what, allowed);
}

EncodedMap read_header(const Frames& frames, size_t index, std::string_view what,
                       std::initializer_list<std::string_view> allowed) {
  return encoded_header(header_bytes(frames, index, what), what, allowed);
}

void write_objects(MsgpackWriter& out, std::span<const Value> values) {
  out.array(values.size());
  for (const Value& value : values) out.value(value);
}

}  // namespace seqflow::transport::wire
