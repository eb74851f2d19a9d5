// The MessagePack writer (common/msgpack_writer.h): every value in its
// shortest form (the lead byte and size earlier builds wrote) at each size
// class boundary; read back by the reader; counts MessagePack cannot hold
// refused.
#include "common/msgpack_writer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/msgpack_reader.h"
#include "error_matchers.h"

namespace seqflow {
namespace {

using Kind = MsgpackReader::Kind;
using test::throws_invalid;

uint8_t lead_of(const std::string& bytes) { return static_cast<uint8_t>(bytes.at(0)); }

struct IntegerCase {
  int64_t value;
  uint8_t lead;
  size_t size;
};

TEST(MsgpackWriter, IntegersTakeTheShortestFormAtEveryBoundary) {
  constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  const std::vector<IntegerCase> cases = {
      {0, 0x00, 1},      {127, 0x7f, 1},    {128, 0xcc, 2},         {255, 0xcc, 2},         {256, 0xcd, 3},
      {65535, 0xcd, 3},  {65536, 0xce, 5},  {4294967295, 0xce, 5},  {4294967296, 0xcf, 9},  {kInt64Max, 0xcf, 9},
      {-1, 0xff, 1},     {-32, 0xe0, 1},    {-33, 0xd0, 2},         {-128, 0xd0, 2},        {-129, 0xd1, 3},
      {-32768, 0xd1, 3}, {-32769, 0xd2, 5}, {-2147483648, 0xd2, 5}, {-2147483649, 0xd3, 9}, {kInt64Min, 0xd3, 9},
  };
  for (const IntegerCase& c : cases) {
    SCOPED_TRACE(c.value);
    MsgpackWriter writer;
    writer.integer(c.value);
    const std::string& bytes = writer.bytes();
    EXPECT_EQ(lead_of(bytes), c.lead);
    EXPECT_EQ(bytes.size(), c.size);
    MsgpackReader reader(bytes, 1);
    const MsgpackReader::Token token = reader.next(0);
    EXPECT_NO_THROW(reader.finish());
    if (c.value >= 0) {
      EXPECT_EQ(token.kind, Kind::kUnsigned);
      EXPECT_EQ(token.number, static_cast<uint64_t>(c.value));
    } else {
      EXPECT_EQ(token.kind, Kind::kSigned);
      EXPECT_EQ(token.integer, c.value);
    }
  }
}

TEST(MsgpackWriter, BooleansAreOneByte) {
  MsgpackWriter writer;
  writer.boolean(false);
  writer.boolean(true);
  EXPECT_EQ(writer.bytes(), "\xc2\xc3");
}

struct SizeCase {
  size_t size;
  uint8_t lead;
  size_t header_bytes;
};

TEST(MsgpackWriter, StringsOfEverySizeClass) {
  const std::vector<SizeCase> cases = {{0, 0xa0, 1},   {31, 0xbf, 1},    {32, 0xd9, 2},   {255, 0xd9, 2},
                                       {256, 0xda, 3}, {65535, 0xda, 3}, {65536, 0xdb, 5}};
  for (const SizeCase& c : cases) {
    SCOPED_TRACE(c.size);
    const std::string text(c.size, 's');
    MsgpackWriter writer;
    writer.string(text);
    const std::string& bytes = writer.bytes();
    EXPECT_EQ(lead_of(bytes), c.lead);
    EXPECT_EQ(bytes.size(), c.header_bytes + c.size);
    MsgpackReader reader(bytes, 1);
    const MsgpackReader::Token token = reader.next(0);
    EXPECT_NO_THROW(reader.finish());
    EXPECT_EQ(token.kind, Kind::kString);
    EXPECT_EQ(token.bytes, text);
  }
}

TEST(MsgpackWriter, BinariesOfEverySizeClass) {
  const std::vector<SizeCase> cases = {
      {0, 0xc4, 2}, {255, 0xc4, 2}, {256, 0xc5, 3}, {65535, 0xc5, 3}, {65536, 0xc6, 5}};
  for (const SizeCase& c : cases) {
    SCOPED_TRACE(c.size);
    std::vector<uint8_t> payload(c.size);
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
    MsgpackWriter writer;
    writer.numbers(std::span<const uint8_t>(payload));
    const std::string& bytes = writer.bytes();
    EXPECT_EQ(lead_of(bytes), c.lead);
    EXPECT_EQ(bytes.size(), c.header_bytes + c.size);
    MsgpackReader reader(bytes, 1);
    const MsgpackReader::Token token = reader.next(0);
    EXPECT_NO_THROW(reader.finish());
    EXPECT_EQ(token.kind, Kind::kBinary);
    EXPECT_EQ(token.subtype, -1);
    EXPECT_EQ(token.bytes, std::string(payload.begin(), payload.end()));
  }
}

TEST(MsgpackWriter, ABinaryOfPartsIsTheirBytesBackToBack) {
  const std::string big(70000, 'b');
  const std::vector<std::string_view> parts = {"ab", "", big, "c"};
  MsgpackWriter writer;
  writer.binary(std::span<const std::string_view>(parts));
  const std::string joined = "ab" + big + "c";
  MsgpackWriter whole;
  whole.binary(std::as_bytes(std::span(joined.data(), joined.size())));
  EXPECT_EQ(writer.bytes(), whole.bytes());
  EXPECT_EQ(writer.bytes().substr(0, 3), std::string("\xc6\x00\x01", 3)) << "bin 32 of 70004 bytes";
  MsgpackWriter none;
  none.binary(std::span<const std::string_view>());
  EXPECT_EQ(none.bytes(), std::string("\xc4\x00", 2));
}

TEST(MsgpackWriter, NumbersTravelAsTheirLittleEndianBytes) {
  const std::vector<int64_t> values = {-1, 0, int64_t{1} << 40, std::numeric_limits<int64_t>::min()};
  MsgpackWriter writer;
  writer.numbers(std::span<const int64_t>(values));
  MsgpackReader reader(writer.bytes(), 1);
  const MsgpackReader::Token token = reader.next(0);
  ASSERT_EQ(token.kind, Kind::kBinary);
  ASSERT_EQ(token.bytes.size(), values.size() * sizeof(int64_t));
  std::vector<int64_t> back(values.size());
  std::memcpy(back.data(), token.bytes.data(), token.bytes.size());
  EXPECT_EQ(back, values);
  EXPECT_EQ(static_cast<uint8_t>(token.bytes[0]), 0xff);          // -1: the low byte first
  EXPECT_EQ(static_cast<uint8_t>(token.bytes[8 + 8 + 5]), 0x01);  // 1 << 40: byte 5 of the third value
}

TEST(MsgpackWriter, ArraysAndMapsOfEverySizeClass) {
  const std::vector<SizeCase> arrays = {{0, 0x90, 1}, {15, 0x9f, 1}, {16, 0xdc, 3}, {65535, 0xdc, 3}, {65536, 0xdd, 5}};
  for (const SizeCase& c : arrays) {
    SCOPED_TRACE(c.size);
    MsgpackWriter writer;
    writer.array(c.size);
    for (size_t i = 0; i < c.size; ++i) writer.boolean(i % 2 == 0);
    EXPECT_EQ(lead_of(writer.bytes()), c.lead);
    EXPECT_EQ(writer.bytes().size(), c.header_bytes + c.size);
    Value want = Value::array();
    for (size_t i = 0; i < c.size; ++i) want.push_back(i % 2 == 0);
    EXPECT_EQ(msgpack_to_value(writer.bytes(), 2), want);
  }
  const std::vector<SizeCase> maps = {{0, 0x80, 1}, {15, 0x8f, 1}, {16, 0xde, 3}, {65535, 0xde, 3}, {65536, 0xdf, 5}};
  for (const SizeCase& c : maps) {
    SCOPED_TRACE(c.size);
    MsgpackWriter writer;
    writer.map(c.size);
    Value want = Value::object();
    for (size_t i = 0; i < c.size; ++i) {
      std::string key = std::to_string(i);
      key.insert(0, 6 - key.size(), '0');
      writer.string(key);
      writer.integer(-static_cast<int64_t>(i));
      want[key] = -static_cast<int64_t>(i);
    }
    EXPECT_EQ(lead_of(writer.bytes()), c.lead);
    EXPECT_EQ(msgpack_to_value(writer.bytes(), 2), want);
  }
}

TEST(MsgpackWriter, ValuesAndEncodedValuesAreAppended) {
  const Value extra = {{"step", 12}, {"weights", Value::array({0.5, -1.5})}, {"note", "x"}, {"none", nullptr}};
  MsgpackWriter encoded;
  encoded.value(extra);
  // Members in key order, numbers in their shortest forms, 0.5 as a float 32.
  EXPECT_EQ(encoded.bytes(), std::string("\x84\xa4none\xc0\xa4note\xa1x\xa4step\x0c\xa7weights\x92"
                                         "\xca\x3f\x00\x00\x00\xca\xbf\xc0\x00\x00",
                                         39));
  MsgpackWriter writer;
  writer.map(2);
  writer.string("extra");
  writer.encoded(encoded.bytes());
  writer.string("empty");
  writer.value(Value::object());
  EXPECT_EQ(msgpack_to_value(writer.bytes(), 4), (Value{{"extra", extra}, {"empty", Value::object()}}));
  MsgpackWriter texts;
  const std::string names[] = {"a", std::string(40, 'b')};
  texts.strings(names);
  EXPECT_EQ(msgpack_to_value(texts.bytes(), 1), Value::array({"a", std::string(40, 'b')}));
}

TEST(MsgpackWriter, ReservingDoesNotWriteAnything) {
  MsgpackWriter writer(1 << 16);
  EXPECT_TRUE(writer.bytes().empty());
  EXPECT_GE(writer.bytes().capacity(), size_t{1} << 16);
  writer.string("k");
  EXPECT_EQ(std::move(writer).take(), "\xa1k");
}

TEST(MsgpackWriter, CountsBeyondThirtyTwoBitsAreRefused) {
  MsgpackWriter writer;
  EXPECT_TRUE(throws_invalid([&] { writer.array(size_t{1} << 32); }, {"2^32 - 1", "4294967296"}));
  EXPECT_TRUE(throws_invalid([&] { writer.map(size_t{1} << 32); }, {"4294967296"}));
  EXPECT_TRUE(writer.bytes().empty()) << "nothing is written for a refused count";
  writer.array(std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(writer.bytes(), std::string("\xdd\xff\xff\xff\xff"));
}

}  // namespace
}  // namespace seqflow
