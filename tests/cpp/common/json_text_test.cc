// JSON text of Values: what nlohmann wrote (files and messages read as they
// always have), read back to equal Values; malformed text is named.
#include "common/json_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "seqflow/error.h"
#include "seqflow/limits.h"

namespace seqflow {
namespace {

TEST(JsonText, WritesCompactTextAsNlohmannDid) {
  const Value value{{"b", Value::array({1, -2, uint64_t{1} << 63, true, nullptr})},
                    {"a", "q\"\\\n\x01é"},
                    {"c", Value::object()},
                    {"d", Value::array()}};
  EXPECT_EQ(json_text(value), R"({"a":"q\"\\\n\u0001é","b":[1,-2,9223372036854775808,true,null],"c":{},"d":[]})");
}

TEST(JsonText, WritesIndentedTextAsNlohmannDid) {
  const Value value{{"files", Value{{"x", 1}}}, {"list", Value::array({1, 2})}, {"empty", Value::object()}};
  EXPECT_EQ(json_text(value, 2),
            "{\n  \"empty\": {},\n  \"files\": {\n    \"x\": 1\n  },\n  \"list\": [\n    1,\n    2\n  ]\n}");
}

TEST(JsonText, WritesDoublesAsNlohmannDid) {
  const std::pair<double, const char*> cases[] = {
      {1.0, "1.0"},          {0.25, "0.25"},       {-0.5, "-0.5"},   {1e14, "100000000000000.0"},
      {1e15, "1e+15"},       {123.456, "123.456"}, {0.001, "0.001"}, {1e-5, "1e-05"},
      {1.5e300, "1.5e+300"}, {0.0, "0.0"},         {-0.0, "-0.0"},   {0.1, "0.1"}};
  for (const auto& [number, text] : cases) EXPECT_EQ(json_text(Value(number)), text) << number;
  EXPECT_EQ(json_text(Value(std::numeric_limits<double>::quiet_NaN())), "null");
}

TEST(JsonText, ReadsBackWhatItWrites) {
  const Value value{{"n", Value::array({0, -1, int64_t{-9223372036854775807} - 1, uint64_t{18446744073709551615u}})},
                    {"d", Value::array({0.1, 1e-300, -2.5e10})},
                    {"s", "tab\t \"quoted\" ünï"},
                    {"o", Value{{"deep", Value::array({Value::object(), false})}}}};
  EXPECT_EQ(parse_json_text(json_text(value), kMaxDecodeNesting), value);
  EXPECT_EQ(parse_json_text(json_text(value, 2), kMaxDecodeNesting), value);
}

TEST(JsonText, ReadsEscapesNumbersAndRepeatedKeys) {
  EXPECT_EQ(parse_json_text(R"( {"a" : "\u00e9\ud83d\ude00\/", "a2": 2.0, "b": 1E2, "big": 18446744073709551616} )",
                            kMaxDecodeNesting),
            (Value{{"a", "é😀/"}, {"a2", 2.0}, {"b", 100.0}, {"big", 18446744073709551616.0}}));
  EXPECT_EQ(parse_json_text(R"({"k": 1, "k": 2})", kMaxDecodeNesting), (Value{{"k", 2}}));
}

TEST(JsonText, NamesMalformedText) {
  const char* cases[] = {"",   "nul",   "[1,]",    "{\"a\" 1}",   "{1: 2}", "\"open",    "01",
                         "1.", "[1] x", "\"\\x\"", "\"\\ud800\"", "-",      "{\"a\":1,}"};
  for (const char* text : cases) {
    try {
      parse_json_text(text, kMaxDecodeNesting);
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find("is not valid JSON: "), std::string::npos) << error.what();
    }
  }
}

TEST(JsonText, RefusesDeeperNestingThanAllowed) {
  EXPECT_NO_THROW(parse_json_text("[[1]]", 2));
  EXPECT_THROW(parse_json_text("[[[1]]]", 2), Error);
}

}  // namespace
}  // namespace seqflow
