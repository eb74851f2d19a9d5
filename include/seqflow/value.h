// A JSON-like value: what users attach to samples and keys (custom_meta,
// kv tags), BatchMeta's extra_info, sampler arguments and state, and a
// checkpoint's user metadata. Null, bool, 64-bit integers, double, UTF-8
// string, array, and object with string keys in sorted order (so equal
// objects encode to equal bytes).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace seqflow {

class Value {
 public:
  using Array = std::vector<Value>;
  using Object = std::map<std::string, Value, std::less<>>;
  // An integer is kInt whenever it fits in int64_t, kUint only above that,
  // so one number has one representation and == compares it exactly.
  enum class Type : uint8_t { kNull, kBool, kInt, kUint, kDouble, kString, kArray, kObject };

  Value() = default;  // null
  Value(std::nullptr_t) {}
  Value(bool value) : data_(value) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) Value(T value) {
    if constexpr (std::is_signed_v<T>) {
      data_ = static_cast<int64_t>(value);
    } else if (static_cast<uint64_t>(value) <= static_cast<uint64_t>(INT64_MAX)) {
      data_ = static_cast<int64_t>(value);
    } else {
      data_ = static_cast<uint64_t>(value);
    }
  }
  Value(double value) : data_(value) {}
  Value(const char* text) : data_(std::string(text)) {}
  Value(std::string_view text) : data_(std::string(text)) {}
  Value(std::string text) : data_(std::move(text)) {}
  Value(Array items) : data_(std::move(items)) {}
  Value(Object members) : data_(std::move(members)) {}
  // An object from its members: Value{{"total_lengths", 12}, {"group_id", "a"}}.
  Value(std::initializer_list<Object::value_type> members) : data_(std::in_place_type<Object>, members) {}
  static Value array(Array items = {}) { return Value(std::move(items)); }
  static Value object(Object members = {}) { return Value(std::move(members)); }

  Type type() const { return static_cast<Type>(data_.index()); }
  // "null", "boolean", "number", "string", "array" or "object".
  const char* type_name() const;
  bool is_null() const { return type() == Type::kNull; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_integer() const { return type() == Type::kInt || type() == Type::kUint; }
  bool is_number() const { return is_integer() || type() == Type::kDouble; }
  bool is_string() const { return type() == Type::kString; }
  bool is_array() const { return type() == Type::kArray; }
  bool is_object() const { return type() == Type::kObject; }
  // An array or object (a container).
  bool is_structured() const { return is_array() || is_object(); }

  // The accessors throw seqflow::Error kInvalidArgument naming both types
  // when the value holds another type (as_int also when a kUint does not fit,
  // as_uint when a kInt is negative; as_double takes any number).
  bool as_bool() const;
  int64_t as_int() const;
  uint64_t as_uint() const;
  double as_double() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Elements of an array or members of an object; 0 for anything else.
  size_t size() const;
  bool empty() const { return size() == 0; }
  // An object's member, or nullptr when there is none or this is no object.
  const Value* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // An object's member; throws kNotFound naming the key when absent.
  const Value& at(std::string_view key) const;
  // An array's element; throws kNotFound when `index` is out of range.
  const Value& at(size_t index) const;
  // An object's member, added as null when absent; a null becomes an object
  // first. Throws kInvalidArgument on any other type.
  Value& operator[](std::string_view key);
  // Appends to an array; a null becomes an array first.
  void push_back(Value item);

  // Compact JSON text (for error messages and logs).
  std::string dump() const;

  bool operator==(const Value& other) const = default;

 private:
  std::variant<std::monostate, bool, int64_t, uint64_t, double, std::string, Array, Object> data_;
};

}  // namespace seqflow
