#include "seqflow/value.h"

#include <string>

#include "common/json_text.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

// The names error messages have always shown (those of the JSON library of
// earlier builds).
constexpr const char* kTypeNames[] = {"null", "boolean", "number", "number", "number", "string", "array", "object"};

[[noreturn]] void wrong_type(const Value& value, const char* wanted) {
  throw_invalid(std::string("Value is ") + value.type_name() + ", not " + wanted);
}

}  // namespace

const char* Value::type_name() const { return kTypeNames[data_.index()]; }

bool Value::as_bool() const {
  if (!is_bool()) wrong_type(*this, "bool");
  return std::get<bool>(data_);
}

int64_t Value::as_int() const {
  if (type() == Type::kInt) return std::get<int64_t>(data_);
  if (type() == Type::kUint) throw_invalid("Value " + dump() + " does not fit in int64");
  wrong_type(*this, "integer");
}

uint64_t Value::as_uint() const {
  if (type() == Type::kUint) return std::get<uint64_t>(data_);
  if (type() != Type::kInt) wrong_type(*this, "integer");
  const int64_t number = std::get<int64_t>(data_);
  if (number < 0) throw_invalid("Value " + dump() + " is negative, not an unsigned integer");
  return static_cast<uint64_t>(number);
}

double Value::as_double() const {
  switch (type()) {
    case Type::kInt:
      return static_cast<double>(std::get<int64_t>(data_));
    case Type::kUint:
      return static_cast<double>(std::get<uint64_t>(data_));
    case Type::kDouble:
      return std::get<double>(data_);
    default:
      wrong_type(*this, "number");
  }
}

const std::string& Value::as_string() const {
  if (!is_string()) wrong_type(*this, "string");
  return std::get<std::string>(data_);
}

const Value::Array& Value::as_array() const {
  if (!is_array()) wrong_type(*this, "array");
  return std::get<Array>(data_);
}

Value::Array& Value::as_array() {
  if (!is_array()) wrong_type(*this, "array");
  return std::get<Array>(data_);
}

const Value::Object& Value::as_object() const {
  if (!is_object()) wrong_type(*this, "object");
  return std::get<Object>(data_);
}

Value::Object& Value::as_object() {
  if (!is_object()) wrong_type(*this, "object");
  return std::get<Object>(data_);
}

size_t Value::size() const {
  if (is_array()) return std::get<Array>(data_).size();
  if (is_object()) return std::get<Object>(data_).size();
  return 0;
}

const Value* Value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  const Object& members = std::get<Object>(data_);
  const auto it = members.find(key);
  return it == members.end() ? nullptr : &it->second;
}

const Value& Value::at(std::string_view key) const {
  const Value* member = find(key);
  if (member == nullptr) {
    if (!is_object()) wrong_type(*this, "object");
    throw Error(ErrorCode::kNotFound, "Value has no member '" + std::string(key) + "'");
  }
  return *member;
}

const Value& Value::at(size_t index) const {
  const Array& items = as_array();
  if (index >= items.size()) {
    throw Error(ErrorCode::kNotFound,
                "Value has " + std::to_string(items.size()) + " elements, no element " + std::to_string(index));
  }
  return items[index];
}

Value& Value::operator[](std::string_view key) {
  if (is_null()) data_ = Object();
  Object& members = as_object();
  const auto it = members.find(key);
  if (it != members.end()) return it->second;
  return members.emplace(std::string(key), Value()).first->second;
}

void Value::push_back(Value item) {
  if (is_null()) data_ = Array();
  as_array().push_back(std::move(item));
}

std::string Value::dump() const { return json_text(*this); }

}  // namespace seqflow
