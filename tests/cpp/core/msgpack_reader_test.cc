// The shared MessagePack reader (common/msgpack_reader.h): every format read
// token by token and as Values, every truncation, nesting beyond the limit,
// trailing and malformed bytes; and the custom_meta checks built on it.
#include "common/msgpack_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/custom_meta.h"
#include "seqflow/custom_meta_list.h"
#include "test_support.h"

namespace seqflow {
namespace {

using Kind = MsgpackReader::Kind;
using test::throws_invalid;

// Bytes spelled out one by one: an encoder only ever writes the shortest form.
std::string bytes_of(std::initializer_list<int> values, std::string_view tail = {}) {
  std::string out;
  for (int value : values) out.push_back(static_cast<char>(value));
  out.append(tail);
  return out;
}

struct Scalar {
  std::string bytes;
  Kind kind;
  uint64_t number = 0;
  int64_t integer = 0;
  double real = 0;
  std::string payload = {};
  int subtype = -1;
};

// One value of every scalar format.
std::vector<Scalar> scalars() {
  const std::string a16(16, 'a');
  return {
      {bytes_of({0x05}), Kind::kUnsigned, 5},
      {bytes_of({0x7f}), Kind::kUnsigned, 127},
      {bytes_of({0xfb}), Kind::kSigned, 0, -5},
      {bytes_of({0xc0}), Kind::kNull},
      {bytes_of({0xc2}), Kind::kBool, 0},
      {bytes_of({0xc3}), Kind::kBool, 1},
      {bytes_of({0xcc, 0xc8}), Kind::kUnsigned, 200},
      {bytes_of({0xcd, 0xea, 0x60}), Kind::kUnsigned, 60000},
      {bytes_of({0xce, 0xee, 0x6b, 0x28, 0x00}), Kind::kUnsigned, 4000000000u},
      {bytes_of({0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0x05}), Kind::kUnsigned, (uint64_t{1} << 63) + 5},
      {bytes_of({0xd0, 0x80}), Kind::kSigned, 0, -128},
      {bytes_of({0xd1, 0x80, 0x00}), Kind::kSigned, 0, -32768},
      {bytes_of({0xd2, 0xff, 0xff, 0xff, 0xfe}), Kind::kSigned, 0, -2},
      {bytes_of({0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0}), Kind::kSigned, 0, std::numeric_limits<int64_t>::min()},
      {bytes_of({0xca, 0x3f, 0xc0, 0x00, 0x00}), Kind::kFloat, 0, 0, 1.5},
      {bytes_of({0xcb, 0xc0, 0x02, 0, 0, 0, 0, 0, 0}), Kind::kFloat, 0, 0, -2.25},
      {bytes_of({0xa3}, "abc"), Kind::kString, 0, 0, 0, "abc"},
      {bytes_of({0xd9, 0x03}, "abc"), Kind::kString, 0, 0, 0, "abc"},
      {bytes_of({0xda, 0x00, 0x03}, "abc"), Kind::kString, 0, 0, 0, "abc"},
      {bytes_of({0xdb, 0, 0, 0, 0x03}, "abc"), Kind::kString, 0, 0, 0, "abc"},
      {bytes_of({0xa0}), Kind::kString},
      {bytes_of({0xc4, 0x02}, "xy"), Kind::kBinary, 0, 0, 0, "xy"},
      {bytes_of({0xc5, 0x00, 0x02}, "xy"), Kind::kBinary, 0, 0, 0, "xy"},
      {bytes_of({0xc6, 0, 0, 0, 0x02}, "xy"), Kind::kBinary, 0, 0, 0, "xy"},
      {bytes_of({0xc7, 0x02, 0xfe}, "xy"), Kind::kBinary, 0, 0, 0, "xy", 0xfe},
      {bytes_of({0xc8, 0x00, 0x02, 0x05}, "xy"), Kind::kBinary, 0, 0, 0, "xy", 5},
      {bytes_of({0xc9, 0, 0, 0, 0x02, 0x05}, "xy"), Kind::kBinary, 0, 0, 0, "xy", 5},
      {bytes_of({0xd4, 0x01}, "a"), Kind::kBinary, 0, 0, 0, "a", 1},
      {bytes_of({0xd5, 0x02}, "aa"), Kind::kBinary, 0, 0, 0, "aa", 2},
      {bytes_of({0xd6, 0x03}, "aaaa"), Kind::kBinary, 0, 0, 0, "aaaa", 3},
      {bytes_of({0xd7, 0x04}, "aaaaaaaa"), Kind::kBinary, 0, 0, 0, "aaaaaaaa", 4},
      {bytes_of({0xd8, 0x7f}, a16), Kind::kBinary, 0, 0, 0, a16, 0x7f},
  };
}

// A map of every format, containers of each size class included.
std::string every_format() {
  std::string out = bytes_of({0xde, 0x00, 0x00});
  size_t count = 0;
  const auto entry = [&](std::string_view value) {
    out.push_back(static_cast<char>(0xa0 | 2));
    out.push_back('k');
    out.push_back(static_cast<char>('A' + count++));
    out.append(value);
  };
  for (const Scalar& scalar : scalars()) entry(scalar.bytes);
  entry(bytes_of({0x92, 0x01, 0xa1, 'z'}));
  entry(bytes_of({0xdc, 0x00, 0x02, 0x90, 0x80}));
  entry(bytes_of({0xdd, 0, 0, 0, 0x01, 0xc0}));
  entry(bytes_of({0x81, 0xa1, 'k', 0x01}));
  entry(bytes_of({0xdf, 0, 0, 0, 0x01, 0xd9, 0x01, 'k', 0x02}));
  out[2] = static_cast<char>(count);
  return out;
}

// Reads the one value `bytes` hold, whatever it is (check_msgpack_map
// takes maps only, msgpack_to_value no binaries).
void read_whole(std::string_view bytes, size_t max_depth) {
  MsgpackReader reader(bytes, max_depth);
  reader.skip(0);
  reader.finish();
}

// `depth` arrays, one inside the other, around 1.
std::string nested_arrays(size_t depth) { return std::string(depth, '\x91') + '\x01'; }

TEST(MsgpackReader, ReadsEveryScalarFormat) {
  for (const Scalar& want : scalars()) {
    SCOPED_TRACE(testing::PrintToString(want.bytes));
    MsgpackReader reader(want.bytes, 1);
    const MsgpackReader::Token got = reader.next(0);
    EXPECT_NO_THROW(reader.finish());
    EXPECT_EQ(got.kind, want.kind);
    EXPECT_EQ(got.number, want.number);
    EXPECT_EQ(got.integer, want.integer);
    EXPECT_EQ(got.real, want.real);
    EXPECT_EQ(got.bytes, want.payload);
    EXPECT_EQ(got.subtype, want.subtype);
  }
}

TEST(MsgpackReader, ReadsContainersAsCountsFollowedByTheirElements) {
  const std::string bytes = bytes_of({0xdc, 0x00, 0x02, 0x81, 0xa1, 'k', 0x05, 0xdf, 0, 0, 0, 0});
  MsgpackReader reader(bytes, 2);
  const MsgpackReader::Token array = reader.next(0);
  EXPECT_EQ(array.kind, Kind::kArray);
  EXPECT_EQ(array.number, 2u);
  const MsgpackReader::Token map = reader.next(1);
  EXPECT_EQ(map.kind, Kind::kMap);
  EXPECT_EQ(map.number, 1u);
  EXPECT_EQ(reader.key(), "k");
  EXPECT_EQ(reader.next(2).number, 5u);
  const MsgpackReader::Token empty = reader.next(1);
  EXPECT_EQ(empty.kind, Kind::kMap);
  EXPECT_EQ(empty.number, 0u);
  EXPECT_NO_THROW(reader.finish());
}

TEST(MsgpackReader, ReadsAMapOfEveryFormatAndValuesAsTheyWereWritten) {
  const std::string bytes = every_format();
  EXPECT_NO_THROW(check_msgpack_map(bytes, 3));
  MsgpackReader reader(bytes, 3);
  EXPECT_EQ(reader.next(0).number, scalars().size() + 5);
  // A repeated key: the last value wins.
  EXPECT_EQ(msgpack_to_value(bytes_of({0x82, 0xa1, 'k', 0x01, 0xa1, 'k', 0x02}), 1), (Value{{"k", 2}}));
  EXPECT_EQ(msgpack_to_value(bytes_of({0x93, 0xd0, 0x80, 0xcb, 0xc0, 0x02, 0,    0,    0,    0,   0,
                                       0,    0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}),
                             1),
            Value::array({-128, -2.25, std::numeric_limits<uint64_t>::max()}));
}

TEST(MsgpackReader, EveryTruncationIsAnErrorNamingTheByte) {
  const std::string bytes = every_format();
  for (size_t keep = 0; keep < bytes.size(); ++keep) {
    SCOPED_TRACE("kept " + std::to_string(keep) + " of " + std::to_string(bytes.size()));
    const std::string_view part(bytes.data(), keep);
    // The error names a byte inside what is there.
    const auto names_a_byte_within = [&](const std::string& message) {
      const size_t at = message.rfind(" at byte ");
      return at != std::string::npos && std::stoul(message.substr(at + 9)) <= keep;
    };
    for (const auto& read :
         {+[](std::string_view b) { read_whole(b, 3); }, +[](std::string_view b) { check_msgpack_map(b, 3); }}) {
      try {
        read(part);
        ADD_FAILURE() << "accepted";
      } catch (const Error& error) {
        EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
        EXPECT_NE(std::string(error.what()).find("is not valid MessagePack: "), std::string::npos) << error.what();
        EXPECT_TRUE(names_a_byte_within(error.what())) << error.what();
      }
    }
  }
  for (const Scalar& scalar : scalars()) {
    for (size_t keep = 0; keep < scalar.bytes.size(); ++keep) {
      EXPECT_TRUE(throws_invalid([&] { MsgpackReader(std::string_view(scalar.bytes).substr(0, keep), 1).next(0); },
                                 {"the data ends inside a value at byte "}))
          << testing::PrintToString(scalar.bytes) << " kept " << keep;
    }
  }
}

TEST(MsgpackReader, NestingBeyondTheLimitIsAnErrorNotARecursion) {
  EXPECT_EQ(msgpack_to_value(nested_arrays(64), 64).dump(), std::string(64, '[') + "1" + std::string(64, ']'));
  EXPECT_NO_THROW(check_msgpack_map("\x81\xa1k" + nested_arrays(63), 64));
  for (size_t depth : {size_t{65}, size_t{100000}, size_t{1} << 22}) {
    SCOPED_TRACE("depth " + std::to_string(depth));
    const std::string bytes = nested_arrays(depth);
    EXPECT_TRUE(throws_invalid([&] { read_whole(bytes, 64); }, {"nests deeper than 64 levels at byte 64"}));
    EXPECT_TRUE(throws_invalid([&] { check_msgpack_map("\x81\xa1k" + bytes, 64); },
                               {"nests deeper than 64 levels at byte 66"}));
  }
  // Maps count as levels as arrays do.
  std::string maps;
  for (int i = 0; i < 5; ++i) maps += "\x81\xa1k";
  maps += '\x01';
  EXPECT_NO_THROW(check_msgpack_map(maps, 5));
  EXPECT_TRUE(throws_invalid([&] { check_msgpack_map(maps, 4); }, {"nests deeper than 4 levels at byte 12"}));
}

TEST(MsgpackReader, TrailingAndMalformedBytesAreErrorsNamingTheProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {bytes_of({0x80, 0x00}), "1 bytes follow the value at byte 1"},
      {bytes_of({0x81, 0xa1, 'k', 0x01, 0xc0, 0xc0}), "2 bytes follow the value at byte 4"},
      {bytes_of({0x81, 0x01, 0x01}), "a map key is not a string at byte 1"},
      {bytes_of({0x81, 0x80, 0x01}), "a map key is not a string at byte 1"},
      {bytes_of({0x81, 0xa1, 'k', 0xc1}), "0xc1 is not a type at byte 3"},
      {bytes_of({0x81, 0xa1, 'k', 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01}),
       "an array of 4294967295 elements overruns the data at byte 3"},
      {bytes_of({0xdf, 0, 0, 0, 0x02, 0xa1, 'k', 0x01}), "a map of 2 pairs overruns the data at byte 0"},
      {bytes_of({0x81, 0xa1, 'k', 0xdb, 0xff, 0xff, 0xff, 0xf0}, "ab"), "the data ends inside a value at byte 8"},
  };
  for (const auto& [bytes, problem] : cases) {
    SCOPED_TRACE(testing::PrintToString(bytes));
    EXPECT_TRUE(throws_invalid([&] { read_whole(bytes, 4); }, {"is not valid MessagePack: " + problem}));
    EXPECT_TRUE(throws_invalid([&] { check_msgpack_map(bytes, 4); }, {"is not valid MessagePack: " + problem}));
  }
  for (const std::string& not_a_map : {bytes_of({0x05}), bytes_of({0x91, 0x80}), bytes_of({0xa1, 'k'})}) {
    EXPECT_TRUE(throws_invalid([&] { check_msgpack_map(not_a_map, 4); }, {"must be a MessagePack map"}));
  }
}

TEST(CustomMetaNesting, FromEncodedRefusesADeepEntryNamingTheLimit) {
  CustomMetaList list;
  list.push_back(Value{{"k", 1}});
  const std::string limit = std::to_string(kMaxDecodeNesting);
  const std::string deep = "\x81\xa1k" + nested_arrays(100000);
  const std::string bytes = list.bytes() + deep;
  const auto first = static_cast<uint32_t>(list.bytes().size());
  const auto end = static_cast<uint32_t>(bytes.size());
  EXPECT_TRUE(throws_invalid(
      [&] {
        CustomMetaList::from_encoded(bytes, {0, first, end});
      },
      {"custom_meta[1] nests deeper than " + limit + " levels"}));

  // At the limit: accepted, and it decodes.
  const std::string at_limit = "\x81\xa1k" + nested_arrays(kMaxDecodeNesting - 1);
  const CustomMetaList ok = CustomMetaList::from_encoded(at_limit, {0, static_cast<uint32_t>(at_limit.size())});
  EXPECT_TRUE(ok[0]["k"].is_array());

  // Trailing bytes and non-maps are refused, as ever.
  EXPECT_TRUE(throws_invalid(
      [&] {
        CustomMetaList::from_encoded(bytes_of({0x80, 0x00}), {0, 2});
      },
      {"custom_meta[0] is not valid MessagePack: 1 bytes follow the value"}));
  EXPECT_TRUE(throws_invalid(
      [&] {
        CustomMetaList::from_encoded(bytes_of({0x91, 0x80}), {0, 2});
      },
      {"custom_meta[0] must be a MessagePack map"}));
}

TEST(CustomMetaNesting, DecodeMetaRefusesADeepValue) {
  EXPECT_TRUE(throws_invalid([&] { core::decode_meta("\x81\xa1k" + nested_arrays(100000)); },
                             {"custom_meta nests deeper than " + std::to_string(kMaxDecodeNesting) + " levels"}));
  EXPECT_TRUE(throws_invalid(
      [&] {
        core::decode_meta(bytes_of({0x81, 0xa1, 'k'}));
      },
      {"custom_meta is not valid MessagePack: the data ends inside a value at byte 3"}));
  EXPECT_EQ(core::decode_meta(bytes_of({0x81, 0xa1, 'k', 0x01})), (Value{{"k", 1}}));
}

}  // namespace
}  // namespace seqflow
