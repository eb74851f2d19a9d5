#include <algorithm>
#include <limits>

#include "common/msgpack_reader.h"
#include "common/value_json.h"
#include "transport/encoded_map.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::wire {

zmq::message_t header_frame(const Json& header) {
  std::vector<uint8_t> bytes = Json::to_msgpack(header);
  return copy_frame(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

Json read_header(const Frames& frames, size_t index, std::string_view what) {
  const std::string_view bytes = header_bytes(frames, index, what);
  Json out;
  try {
    out = msgpack_to_json(bytes, kMaxDecodeNesting);
  } catch (const Error& error) {
    throw_invalid(std::string(what) + " header " + error.what());
  }
  if (!out.is_object()) {
    throw_invalid(std::string(what) + " header must be a MessagePack map, got " + out.type_name());
  }
  return out;
}

std::string request_name(std::string_view op) { return std::string(op) + " request"; }
std::string reply_name(std::string_view op) { return std::string(op) + " reply"; }

Frames empty_message() { return header_message(Json::object()); }

void read_empty_message(const Frames& frames, std::string_view what) { read_header(frames, 0, what, {}); }

Header read_header(const Frames& frames, size_t index, std::string_view what,
                   std::initializer_list<std::string_view> allowed) {
  return Header(read_header(frames, index, what), what, allowed);
}

Header::Header(Json header, std::string_view what, std::initializer_list<std::string_view> allowed)
    : header_(std::move(header)), what_(what) {
  if (!header_.is_object()) {
    throw_invalid(what_ + " must be a map, got " + std::string(header_.type_name()));
  }
  for (const auto& item : header_.items()) {
    if (std::find(allowed.begin(), allowed.end(), item.key()) == allowed.end()) {
      throw_invalid(what_ + " has an unknown field " + in_quotes(item.key()));
    }
  }
}

void Header::fail(std::string_view key, std::string_view problem) const {
  throw_invalid(what_ + " field " + in_quotes(key) + " " + std::string(problem));
}

bool Header::has(std::string_view key) const {
  auto it = header_.find(key);
  return it != header_.end() && !it->is_null();
}

const Json& Header::at(std::string_view key) const {
  auto it = header_.find(key);
  if (it == header_.end()) throw_invalid(what_ + " lacks the field " + in_quotes(key));
  return *it;
}

std::string Header::text(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_string()) fail(key, "must be a string, got " + std::string(value.type_name()));
  return value.get<std::string>();
}

int64_t Header::integer(std::string_view key) const {
  const Json& value = at(key);
  if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
    fail(key, "is out of range");
  }
  if (!value.is_number_integer()) fail(key, "must be an integer, got " + std::string(value.type_name()));
  return value.get<int64_t>();
}

bool Header::boolean(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_boolean()) fail(key, "must be a boolean, got " + std::string(value.type_name()));
  return value.get<bool>();
}

std::vector<std::string> Header::texts(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_array()) fail(key, "must be an array of strings");
  std::vector<std::string> out;
  out.reserve(value.size());
  for (const Json& item : value) {
    if (!item.is_string()) fail(key, "must be an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

Json encode_objects(std::span<const Value> values) {
  Json out = Json::array();
  for (const Value& value : values) out.push_back(to_json(value));
  return out;
}

std::vector<Value> Header::objects(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_array()) fail(key, "must be an array of maps");
  std::vector<Value> out;
  out.reserve(value.size());
  for (const Json& item : value) {
    if (!item.is_object() && !item.is_null()) fail(key, "must be an array of maps");
    try {
      out.push_back(from_json(item));
    } catch (const Error& error) {
      fail(key, error.what());
    }
  }
  return out;
}

}  // namespace seqflow::transport::wire
