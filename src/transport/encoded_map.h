// The direct reader of a MessagePack header: a map read in place, its
// values decoded when asked for, with the same checks and messages as
// wire::Header (which reads a JSON tree). The hot messages (every get_meta's
// request and reply, kv_list's reply) are read with it: a tree cost a round
// trip ~30 us. Internal to the transport layer's codecs.
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "common/msgpack_reader.h"
#include "seqflow/error.h"
#include "seqflow/limits.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::wire {

// 'text', as every header error quotes a key.
inline std::string in_quotes(std::string_view text) { return "'" + std::string(text) + "'"; }

// nlohmann's names, so that a message reads the same whichever decoder wrote it.
const char* type_name(MsgpackReader::Kind kind);

// A map read in place from MessagePack that has been checked whole (so
// reading it meets no malformed bytes): where each allowed key's value lies,
// decoded when asked for, with Header's checks and messages. Nothing is
// allocated unless a check fails (a reply holds a map per field schema).
class EncodedMap {
 public:
  static constexpr size_t kMaxFields = 11;

  // The map is `bytes`, inside `depth` containers; errors name it `what`,
  // or "<what> schema of '<schema_of>'" for a field schema. `allowed` holds
  // at most kMaxFields keys.
  EncodedMap(std::string_view bytes, size_t depth, std::string_view what,
             std::initializer_list<std::string_view> allowed, std::string_view schema_of = {})
      : depth_(depth), what_(what), schema_of_(schema_of) {
    MsgpackReader reader(bytes, kMaxDecodeNesting);
    const MsgpackReader::Token map = reader.next(depth);
    if (map.kind != MsgpackReader::Kind::kMap) throw_invalid(name() + " must be a map, got " + type_name(map.kind));
    for (std::string_view key : allowed) fields_.at(field_count_++) = Field{key, {}};
    const auto fields_end = fields_.begin() + static_cast<std::ptrdiff_t>(field_count_);
    for (uint64_t i = 0; i < map.number; ++i) {
      const std::string_view key = reader.key();
      const auto field = std::find_if(fields_.begin(), fields_end, [&](const Field& f) { return f.key == key; });
      if (field == fields_end) throw_invalid(name() + " has an unknown field " + in_quotes(key));
      const size_t start = reader.position();
      reader.skip(depth + 1);
      field->value = bytes.substr(start, reader.position() - start);  // a repeated key: the last one wins
    }
  }

  std::string text(std::string_view key) const {
    const MsgpackReader::Token token = first_token(key);
    if (token.kind != MsgpackReader::Kind::kString)
      fail(key, std::string("must be a string, got ") + type_name(token.kind));
    return std::string(token.bytes);
  }

  int64_t integer(std::string_view key) const {
    const MsgpackReader::Token token = first_token(key);
    if (token.kind == MsgpackReader::Kind::kSigned) return token.integer;
    if (token.kind != MsgpackReader::Kind::kUnsigned) {
      fail(key, std::string("must be an integer, got ") + type_name(token.kind));
    }
    if (token.number > uint64_t(std::numeric_limits<int64_t>::max())) fail(key, "is out of range");
    return static_cast<int64_t>(token.number);
  }

  bool boolean(std::string_view key) const {
    const MsgpackReader::Token token = first_token(key);
    if (token.kind != MsgpackReader::Kind::kBool)
      fail(key, std::string("must be a boolean, got ") + type_name(token.kind));
    return token.number != 0;
  }

  std::vector<std::string> texts(std::string_view key) const {
    MsgpackReader reader(value(key), kMaxDecodeNesting);
    const MsgpackReader::Token array = reader.next(depth_ + 1);
    if (array.kind != MsgpackReader::Kind::kArray) fail(key, "must be an array of strings");
    std::vector<std::string> out;
    out.reserve(array.number);
    for (uint64_t i = 0; i < array.number; ++i) {
      const MsgpackReader::Token item = reader.next(depth_ + 2);
      if (item.kind != MsgpackReader::Kind::kString) fail(key, "must be an array of strings");
      out.emplace_back(item.bytes);
    }
    return out;
  }

  std::string_view binary(std::string_view key) const {
    const MsgpackReader::Token token = first_token(key);
    if (token.kind != MsgpackReader::Kind::kBinary) fail(key, "must be a binary array");
    return token.bytes;
  }

  template <typename T>
  std::vector<T> numbers(std::string_view key) const {
    const std::string_view bytes = binary(key);
    if (bytes.size() % sizeof(T) != 0) fail(key, "holds a partial element");
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }

  Value decoded(std::string_view key) const {
    MsgpackReader reader(value(key), kMaxDecodeNesting);
    return read_value(reader, depth_ + 1);
  }

  bool has(std::string_view key) const {
    for (size_t i = 0; i < field_count_; ++i) {
      if (fields_[i].key == key) return !fields_[i].value.empty();
    }
    return false;
  }

  // The bytes of the value of `key`, one value inside depth() + 1 containers.
  std::string_view value(std::string_view key) const {
    for (size_t i = 0; i < field_count_; ++i) {
      if (fields_[i].key == key && !fields_[i].value.empty()) return fields_[i].value;
    }
    throw_invalid(name() + " lacks the field " + in_quotes(key));
  }
  size_t depth() const { return depth_; }

  [[noreturn]] void fail(std::string_view key, std::string_view problem) const {
    throw_invalid(name() + " field " + in_quotes(key) + " " + std::string(problem));
  }

 private:
  struct Field {
    std::string_view key;
    std::string_view value;  // empty: absent (a value takes a byte at least)
  };

  // The value's first token: a scalar, or a container's count.
  MsgpackReader::Token first_token(std::string_view key) const {
    MsgpackReader reader(value(key), kMaxDecodeNesting);
    return reader.next(depth_ + 1);
  }

  std::string name() const {
    return schema_of_.empty() ? std::string(what_) : std::string(what_) + " schema of " + in_quotes(schema_of_);
  }

  size_t depth_;
  std::string_view what_;
  std::string_view schema_of_;
  std::array<Field, kMaxFields> fields_;
  size_t field_count_ = 0;
};

// frames[index], which must be there.
std::string_view header_bytes(const Frames& frames, size_t index, std::string_view what);

// A header frame's bytes as a map, checked whole first: malformed
// MessagePack is named as read_header names it.
EncodedMap encoded_header(std::string_view bytes, std::string_view what,
                          std::initializer_list<std::string_view> allowed);

// A JSON value as MessagePack, for the direct readers.
std::string msgpack_of(const Json& value);

// The partition of each of `samples` samples, sent as runs: "partitions"
// (names) and "partition_ends". Map: an EncodedMap or a Header.
template <typename Map>
PartitionIdList partition_runs(const Map& header, size_t samples) {
  const std::vector<std::string> names = header.texts("partitions");
  const auto ends = header.template numbers<uint64_t>("partition_ends");
  if (names.size() != ends.size()) header.fail("partition_ends", "must hold one end per partition");
  PartitionIdList out;
  uint64_t begin = 0;
  for (size_t r = 0; r < names.size(); ++r) {
    if (ends[r] <= begin || ends[r] > samples) header.fail("partition_ends", "must ascend within the sample count");
    out.append(ends[r] - begin, names[r]);
    begin = ends[r];
  }
  if (begin != samples) header.fail("partition_ends", "must end at the sample count " + std::to_string(samples));
  return out;
}

}  // namespace seqflow::transport::wire
