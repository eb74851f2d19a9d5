#include "seqflow/value.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/msgpack_reader.h"
#include "common/msgpack_writer.h"
#include "error_matchers.h"

namespace seqflow {
namespace {

using test::throws_code;

Value sample_value() {
  return Value{{"total_lengths", 1834},
               {"group_id", "g1"},
               {"score", -0.5},
               {"big", std::numeric_limits<uint64_t>::max()},
               {"flags", Value::array({true, false, nullptr})},
               {"nested", {{"k", Value::array({1, 2.25, "x", Value::object()})}}}};
}

std::string packed(const Value& value) {
  MsgpackWriter out;
  out.value(value);
  return std::move(out).take();
}

TEST(Value, HoldsEachTypeAndReportsIt) {
  EXPECT_EQ(Value().type(), Value::Type::kNull);
  EXPECT_EQ(Value(nullptr).type(), Value::Type::kNull);
  EXPECT_EQ(Value(true).type(), Value::Type::kBool);
  EXPECT_EQ(Value(-3).type(), Value::Type::kInt);
  EXPECT_EQ(Value(2.5).type(), Value::Type::kDouble);
  EXPECT_EQ(Value("text").type(), Value::Type::kString);
  EXPECT_EQ(Value::array({1, 2}).type(), Value::Type::kArray);
  EXPECT_EQ((Value{{"a", 1}}).type(), Value::Type::kObject);
  EXPECT_EQ(Value(2.5).type_name(), std::string("number"));
  EXPECT_EQ(Value::object().type_name(), std::string("object"));
  EXPECT_TRUE(Value::array().is_structured());
  EXPECT_FALSE(Value("x").is_structured());
}

TEST(Value, AnIntegerHasOneRepresentation) {
  // Unsigned values that fit int64 are kInt, so 5 == 5u whatever the source.
  EXPECT_EQ(Value(uint64_t{5}).type(), Value::Type::kInt);
  EXPECT_EQ(Value(uint64_t{5}), Value(int64_t{5}));
  EXPECT_EQ(Value(std::numeric_limits<uint64_t>::max()).type(), Value::Type::kUint);
  EXPECT_EQ(Value(std::numeric_limits<uint64_t>::max()).as_uint(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(Value(int64_t{7}).as_uint(), 7u);
  EXPECT_EQ(Value(7).as_double(), 7.0);
  EXPECT_NE(Value(1), Value(1.0));  // different types, as in the MessagePack they become
}

TEST(Value, WrongAccessNamesBothTypes) {
  const ErrorCode invalid = ErrorCode::kInvalidArgument;
  EXPECT_TRUE(throws_code([] { (void)Value("x").as_int(); }, invalid, {"Value is string, not integer"}));
  EXPECT_TRUE(throws_code([] { (void)Value(1).as_string(); }, invalid, {"Value is number, not string"}));
  EXPECT_TRUE(throws_code([] { (void)Value(1.5).as_int(); }, invalid, {"not integer"}));
  EXPECT_TRUE(throws_code([] { (void)Value().as_bool(); }, invalid, {"Value is null, not bool"}));
  EXPECT_TRUE(throws_code([] { (void)Value("x").as_double(); }, invalid, {"not number"}));
  EXPECT_TRUE(throws_code([] { (void)Value(1).as_array(); }, invalid, {"not array"}));
  EXPECT_TRUE(throws_code([] { (void)Value::array().as_object(); }, invalid, {"Value is array, not object"}));
  EXPECT_TRUE(throws_code([] { (void)Value(std::numeric_limits<uint64_t>::max()).as_int(); }, invalid,
                          {"18446744073709551615 does not fit in int64"}));
  EXPECT_TRUE(throws_code([] { (void)Value(-1).as_uint(); }, invalid, {"-1 is negative"}));
  Value array = Value::array({1});
  EXPECT_TRUE(throws_code([&] { array["k"] = 1; }, invalid, {"Value is array, not object"}));
  Value text = "x";
  EXPECT_TRUE(throws_code([&] { text.push_back(1); }, invalid, {"Value is string, not array"}));
}

TEST(Value, ObjectAndArrayAccess) {
  Value value = sample_value();
  EXPECT_EQ(value.size(), 6u);
  EXPECT_EQ(value.at("total_lengths").as_int(), 1834);
  EXPECT_EQ(value.at("nested").at("k").at(1).as_double(), 2.25);
  EXPECT_EQ(value.find("missing"), nullptr);
  EXPECT_EQ(Value(3).find("k"), nullptr);
  EXPECT_TRUE(throws_code([&] { (void)value.at("missing"); }, ErrorCode::kNotFound, {"no member 'missing'"}));
  EXPECT_TRUE(throws_code([&] { (void)value.at("flags").at(3); }, ErrorCode::kNotFound, {"3 elements, no element 3"}));
  value["added"] = "new";
  EXPECT_EQ(value.at("added"), Value("new"));
  Value grown;  // null becomes what is asked of it
  grown["a"]["b"] = 1;
  EXPECT_EQ(grown, (Value{{"a", {{"b", 1}}}}));
  Value list;
  list.push_back(1);
  list.push_back("two");
  EXPECT_EQ(list, Value::array({1, "two"}));
  EXPECT_TRUE(Value::object().empty());
  EXPECT_EQ(Value(5).size(), 0u);
}

TEST(Value, DumpsCompactJson) {
  EXPECT_EQ((Value{{"b", Value::array({1, 2.5, nullptr, true})}, {"a", "x\"y"}}).dump(),
            R"({"a":"x\"y","b":[1,2.5,null,true]})");
  EXPECT_EQ(Value(std::numeric_limits<uint64_t>::max()).dump(), "18446744073709551615");
}

// Bytes spelled in hex.
std::string from_hex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

std::string repeated(std::string_view text, size_t times) {
  std::string out;
  for (size_t i = 0; i < times; ++i) out += text;
  return out;
}

TEST(Value, MessagePackIsTheBytesEarlierBuildsWrote) {
  // Checkpoints and the wire hold bytes written before Value existed (by a
  // JSON library): the encoding must not change. Members in key order,
  // integers and floats in their shortest exact forms.
  const std::vector<std::pair<Value, std::string>> cases = {
      {sample_value(),
       "86a3626967cfffffffffffffffffa5666c61677393c3c2c0a867726f75705f6964a26731a66e657374656481a16b9401ca40100000"
       "a17880a573636f7265cabf000000ad746f74616c5f6c656e67746873cd072a"},
      {Value(), "c0"},
      {Value(-33), "d0df"},
      {Value(-129), "d1ff7f"},
      {Value(int64_t{1} << 40), "cf0000010000000000"},
      {Value(-(int64_t{1} << 40)), "d3ffffff0000000000"},
      {Value(0.5), "ca3f000000"},
      {Value(0.1), "cb3fb999999999999a"},
      {Value(1e300), "cb7e37e43c8800759c"},
      {Value(std::nan("")), "cb7ff8000000000000"},
      {Value(std::string(300, 'x')), "da012c" + repeated("78", 300)},
      {Value::array(std::vector<Value>(20, Value(1))), "dc0014" + repeated("01", 20)}};
  for (const auto& [value, hex] : cases) EXPECT_EQ(packed(value), from_hex(hex)) << value.dump();
}

TEST(Value, MessagePackRoundTrips) {
  const Value value = sample_value();
  EXPECT_EQ(msgpack_to_value(packed(value), 64), value);
  // A float 32 on the wire comes back as the double it holds.
  EXPECT_EQ(msgpack_to_value(packed(Value(0.5)), 64), Value(0.5));
}

TEST(Value, MessagePackReaderRefusesWhatValueCannotHold) {
  const std::string binary("\x81\xa1\x62\xc4\x01\x01", 6);  // {"b": a binary of one byte}
  EXPECT_TRUE(throws_code([&] { (void)msgpack_to_value(binary, 64); }, ErrorCode::kInvalidArgument,
                          {"binary data", "at byte 3"}));
  EXPECT_TRUE(throws_code([] { (void)msgpack_to_value(std::string("\x91\x91\x91\x01", 4), 2); },
                          ErrorCode::kInvalidArgument, {"nests deeper than 2 levels"}));
}

}  // namespace
}  // namespace seqflow
