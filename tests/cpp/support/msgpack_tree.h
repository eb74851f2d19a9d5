// A MessagePack value as a tree the tests build, read and change: a wire
// header or a checkpoint, spoiled one member at a time. It holds binaries
// (which seqflow::Value does not) and keeps map keys in byte order, as the
// codecs write them, so an unchanged tree writes the bytes it was read from.
// Reading and writing go through MsgpackReader and MsgpackWriter (an ext
// value reads as a plain binary). No test framework: the fuzz target uses it.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/msgpack_reader.h"
#include "common/msgpack_writer.h"
#include "seqflow/limits.h"

namespace seqflow::test {

class Tree {
 public:
  using Array = std::vector<Tree>;
  using Map = std::map<std::string, Tree, std::less<>>;
  struct Binary {
    std::string bytes;
    bool operator==(const Binary&) const = default;
  };

  Tree() = default;  // nil
  Tree(std::nullptr_t) {}
  Tree(bool value) : data_(value) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) Tree(T value) {
    if constexpr (std::is_signed_v<T>) {
      data_ = static_cast<int64_t>(value);
    } else {
      data_ = static_cast<uint64_t>(value);
    }
  }
  Tree(double value) : data_(value) {}
  Tree(const char* text) : data_(std::string(text)) {}
  Tree(std::string text) : data_(std::move(text)) {}
  Tree(Binary bytes) : data_(std::move(bytes)) {}
  Tree(Array items) : data_(std::move(items)) {}
  // A map from its members: Tree{{"indexes", Tree::numbers<int64_t>({1})}, {"fields", Tree::array({"x"})}}.
  Tree(std::initializer_list<Map::value_type> members) : data_(Map(members)) {}

  static Tree array(Array items = {}) { return Tree(std::move(items)); }
  static Tree map() { return Tree(std::initializer_list<Map::value_type>{}); }
  static Tree binary(std::string_view bytes) { return Tree(Binary{std::string(bytes)}); }
  static Tree binary(const std::vector<uint8_t>& bytes) {
    return binary(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  // Little-endian values, as the codecs send numeric arrays.
  template <typename T>
  static Tree numbers(std::span<const T> values) {
    return binary(std::string_view(reinterpret_cast<const char*>(values.data()), values.size_bytes()));
  }
  template <typename T>
  static Tree numbers(const std::vector<T>& values) {
    return numbers(std::span<const T>(values));
  }
  // A list of strings.
  static Tree strings(const std::vector<std::string>& texts) { return array(Array(texts.begin(), texts.end())); }

  // The one value `bytes` hold; throws seqflow::Error as the reader does.
  static Tree read(std::string_view bytes) {
    MsgpackReader reader(bytes, kMaxDecodeNesting);
    Tree out = read(reader, 0);
    reader.finish();
    return out;
  }
  std::string bytes() const {
    MsgpackWriter out;
    write(out);
    return std::move(out).take();
  }

  bool is_null() const { return std::holds_alternative<std::monostate>(data_); }
  bool is_map() const { return std::holds_alternative<Map>(data_); }
  bool is_array() const { return std::holds_alternative<Array>(data_); }
  bool is_binary() const { return std::holds_alternative<Binary>(data_); }
  // A binary's bytes, to change in place.
  std::string& binary_bytes() { return get<Binary>().bytes; }
  Map& as_map() { return get<Map>(); }
  Array& as_array() { return get<Array>(); }
  const Map& as_map() const { return get<Map>(); }
  const Array& as_array() const { return get<Array>(); }
  size_t size() const { return is_map() ? as_map().size() : is_array() ? as_array().size() : 0; }
  bool contains(std::string_view key) const { return is_map() && as_map().find(key) != as_map().end(); }

  // A map's member, added as nil when absent (a nil becomes a map first).
  Tree& operator[](std::string_view key) {
    if (is_null()) data_ = Map();
    return get<Map>().try_emplace(std::string(key)).first->second;
  }
  Tree& operator[](size_t index) { return get<Array>().at(index); }
  const Tree& at(std::string_view key) const {
    const auto member = as_map().find(key);
    if (member == as_map().end()) throw std::logic_error("no member '" + std::string(key) + "'");
    return member->second;
  }
  void erase(std::string_view key) {
    const auto member = as_map().find(key);
    if (member != as_map().end()) as_map().erase(member);
  }
  void erase(size_t index) { as_array().erase(as_array().begin() + static_cast<std::ptrdiff_t>(index)); }
  void push_back(Tree item) { get<Array>().push_back(std::move(item)); }

  bool operator==(const Tree&) const = default;

 private:
  template <typename T>
  T& get() {
    if (T* held = std::get_if<T>(&data_)) return *held;
    throw std::logic_error("a test's tree holds another type than it uses");
  }
  template <typename T>
  const T& get() const {
    if (const T* held = std::get_if<T>(&data_)) return *held;
    throw std::logic_error("a test's tree holds another type than it uses");
  }

  // Recursion is bounded by the reader's depth limit.
  static Tree read(MsgpackReader& reader, size_t depth) {
    using Kind = MsgpackReader::Kind;
    const MsgpackReader::Token token = reader.next(depth);
    switch (token.kind) {
      case Kind::kNull:
        return Tree();
      case Kind::kBool:
        return Tree(token.number != 0);
      case Kind::kUnsigned:
        return Tree(token.number);
      case Kind::kSigned:
        return Tree(token.integer);
      case Kind::kFloat:
        return Tree(token.real);
      case Kind::kString:
        return Tree(std::string(token.bytes));
      case Kind::kBinary:
        return binary(token.bytes);
      case Kind::kArray: {
        Array items;
        for (uint64_t i = 0; i < token.number; ++i) items.push_back(read(reader, depth + 1));
        return Tree(std::move(items));
      }
      case Kind::kMap:
        break;
    }
    Tree out = map();
    for (uint64_t i = 0; i < token.number; ++i) {
      std::string key(reader.key());
      out.as_map().insert_or_assign(std::move(key), read(reader, depth + 1));  // a repeated key: the last one wins
    }
    return out;
  }

  void write(MsgpackWriter& out) const {
    std::visit(
        [&out](const auto& value) {
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, std::monostate>) {
            out.nil();
          } else if constexpr (std::is_same_v<T, bool>) {
            out.boolean(value);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            out.integer(value);
          } else if constexpr (std::is_same_v<T, uint64_t>) {
            out.unsigned_integer(value);
          } else if constexpr (std::is_same_v<T, double>) {
            out.real(value);
          } else if constexpr (std::is_same_v<T, std::string>) {
            out.string(value);
          } else if constexpr (std::is_same_v<T, Binary>) {
            out.binary(std::as_bytes(std::span(value.bytes.data(), value.bytes.size())));
          } else if constexpr (std::is_same_v<T, Array>) {
            out.array(value.size());
            for (const Tree& item : value) item.write(out);
          } else {
            out.map(value.size());
            for (const auto& [key, item] : value) {
              out.string(key);
              item.write(out);
            }
          }
        },
        data_);
  }

  std::variant<std::monostate, bool, int64_t, uint64_t, double, std::string, Binary, Array, Map> data_;
};

}  // namespace seqflow::test
