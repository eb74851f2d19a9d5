// The one reader of a MessagePack map from outside the process: a wire
// header, a map inside one (a column, a field schema), a checkpoint's maps.
// The map is read in place: where each allowed key's value lies is found
// once, and a value is decoded when asked for, its type checked. Errors are
// kInvalidArgument naming the map, the key and the problem:
//   "<what> has an unknown field 'bogus'"
//   "<what> lacks the field 'indexes'"
//   "<what> field 'count' must be an integer, got string"
// A key whose value is nil is there for value() and the typed accessors
// (which name its type, null) and absent for has(): optional keys sent as nil
// read as not sent.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/msgpack_reader.h"
#include "seqflow/error.h"
#include "seqflow/limits.h"
#include "seqflow/value.h"

namespace seqflow {

// 'text', as every map error quotes a key.
inline std::string in_quotes(std::string_view text) { return "'" + std::string(text) + "'"; }

// "null", "boolean", "number", "string", "binary", "array" or "object": the
// names errors have always shown.
const char* type_name(MsgpackReader::Kind kind);

// The elements of the array `bytes` (one value inside `depth` containers),
// each one value inside depth + 1; nullopt when `bytes` hold another value.
std::optional<std::vector<std::string_view>> array_elements(std::string_view bytes, size_t depth);

// The bytes must stay where they are while the map is read (a frame not
// moved, a string not changed). Nothing is allocated unless a check fails
// or `what` is long (a reply holds a map per field schema).
class EncodedMap {
 public:
  static constexpr size_t kMaxFields = 16;

  // The map is `bytes`, inside `depth` containers; errors name it `what`,
  // or "<what> schema of '<schema_of>'" for a field schema. `allowed` holds
  // at most kMaxFields keys; any other key is an error.
  EncodedMap(std::string_view bytes, size_t depth, std::string_view what,
             std::initializer_list<std::string_view> allowed, std::string_view schema_of = {})
      : EncodedMap(bytes, depth, what, allowed, schema_of, false) {}

  // As above, passing over keys outside `allowed`: a checkpoint's maps, whose
  // readers have always ignored keys they do not use.
  static EncodedMap skipping_unknown(std::string_view bytes, size_t depth, std::string_view what,
                                     std::initializer_list<std::string_view> allowed) {
    return EncodedMap(bytes, depth, what, allowed, {}, true);
  }

  std::string text(std::string_view key) const {
    const MsgpackReader::Token token = this->token(key);
    if (token.kind != MsgpackReader::Kind::kString)
      fail(key, std::string("must be a string, got ") + type_name(token.kind));
    return std::string(token.bytes);
  }

  int64_t integer(std::string_view key) const {
    const MsgpackReader::Token token = this->token(key);
    if (token.kind == MsgpackReader::Kind::kSigned) return token.integer;
    if (token.kind != MsgpackReader::Kind::kUnsigned) {
      fail(key, std::string("must be an integer, got ") + type_name(token.kind));
    }
    if (token.number > uint64_t(std::numeric_limits<int64_t>::max())) fail(key, "is out of range");
    return static_cast<int64_t>(token.number);
  }

  // An integer in an unsigned form (a signed form is refused even when it is
  // not negative, as peers and earlier builds write no such thing).
  uint64_t unsigned_integer(std::string_view key) const {
    const MsgpackReader::Token token = this->token(key);
    if (token.kind == MsgpackReader::Kind::kUnsigned) return token.number;
    // The value only when it is a number: a peer's string may not be UTF-8.
    fail(key, "must be an unsigned integer, got " + (token.kind == MsgpackReader::Kind::kSigned
                                                         ? std::to_string(token.integer)
                                                         : std::string(type_name(token.kind))));
  }

  bool boolean(std::string_view key) const {
    const MsgpackReader::Token token = this->token(key);
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

  // A binary's (or an ext value's) bytes.
  std::string_view binary(std::string_view key) const {
    const MsgpackReader::Token token = this->token(key);
    if (token.kind != MsgpackReader::Kind::kBinary) fail(key, "must be a binary array");
    return token.bytes;
  }

  // A binary of little-endian T values.
  template <typename T>
  std::vector<T> numbers(std::string_view key) const {
    const std::string_view bytes = binary(key);
    if (bytes.size() % sizeof(T) != 0) fail(key, "holds a partial element");
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }

  // Any value but a binary, as a Value.
  Value decoded(std::string_view key) const {
    MsgpackReader reader(value(key), kMaxDecodeNesting);
    return read_value(reader, depth_ + 1);
  }

  // An array of maps (custom_meta, tags) or nils (no metadata), as Values.
  std::vector<Value> objects(std::string_view key) const;

  // The map that is the value of `key`, named `what`.
  EncodedMap map(std::string_view key, std::string_view what, std::initializer_list<std::string_view> allowed) const {
    return EncodedMap(value(key), depth_ + 1, what, allowed);
  }

  // The elements of the array that is the value of `key`, each one value
  // inside depth() + 2 containers; fail(key, problem) unless it is an array.
  std::vector<std::string_view> elements(std::string_view key, std::string_view problem) const;
  // The members of the map that is the value of `key` (any keys, in their
  // order), each value inside depth() + 2 containers; fail(key, problem)
  // unless it is a map.
  std::vector<std::pair<std::string_view, std::string_view>> members(std::string_view key,
                                                                     std::string_view problem) const;

  bool has(std::string_view key) const {
    const Field* field = find(key);
    return field != nullptr && !field->value.empty() && field->value.front() != '\xc0';
  }

  // The bytes of the value of `key`, one value inside depth() + 1 containers.
  std::string_view value(std::string_view key) const {
    const Field* field = find(key);
    if (field == nullptr || field->value.empty()) throw_invalid(name() + " lacks the field " + in_quotes(key));
    return field->value;
  }
  // The first token of the value of `key`: a scalar, or a container's count.
  MsgpackReader::Token token(std::string_view key) const {
    MsgpackReader reader(value(key), kMaxDecodeNesting);
    return reader.next(depth_ + 1);
  }
  size_t depth() const { return depth_; }
  const std::string& what() const { return what_; }

  [[noreturn]] void fail(std::string_view key, std::string_view problem) const {
    throw_invalid(name() + " field " + in_quotes(key) + " " + std::string(problem));
  }

 private:
  struct Field {
    std::string_view key;
    std::string_view value;  // empty: absent (a value takes a byte at least)
  };

  EncodedMap(std::string_view bytes, size_t depth, std::string_view what,
             std::initializer_list<std::string_view> allowed, std::string_view schema_of, bool skip_unknown)
      : depth_(depth), what_(what), schema_of_(schema_of) {
    MsgpackReader reader(bytes, kMaxDecodeNesting);
    const MsgpackReader::Token map = reader.next(depth);
    if (map.kind != MsgpackReader::Kind::kMap) throw_invalid(name() + " must be a map, got " + type_name(map.kind));
    for (std::string_view key : allowed) fields_.at(field_count_++) = Field{key, {}};
    const auto fields_end = fields_.begin() + static_cast<std::ptrdiff_t>(field_count_);
    for (uint64_t i = 0; i < map.number; ++i) {
      const std::string_view key = reader.key();
      const auto field = std::find_if(fields_.begin(), fields_end, [&](const Field& f) { return f.key == key; });
      if (field == fields_end && !skip_unknown) throw_invalid(name() + " has an unknown field " + in_quotes(key));
      const size_t start = reader.position();
      reader.skip(depth + 1);
      // A repeated key: the last one wins.
      if (field != fields_end) field->value = bytes.substr(start, reader.position() - start);
    }
  }

  const Field* find(std::string_view key) const {
    for (size_t i = 0; i < field_count_; ++i) {
      if (fields_[i].key == key) return &fields_[i];
    }
    return nullptr;
  }

  std::string name() const { return schema_of_.empty() ? what_ : what_ + " schema of " + in_quotes(schema_of_); }

  size_t depth_;
  std::string what_;
  std::string_view schema_of_;
  std::array<Field, kMaxFields> fields_;
  size_t field_count_ = 0;
};

}  // namespace seqflow
