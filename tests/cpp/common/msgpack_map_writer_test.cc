// The map writer (common/msgpack_map_writer.h): members written in key
// order whatever order they were set in, a key set again holding its last
// value, maps inside maps.
#include "common/msgpack_map_writer.h"

#include <gtest/gtest.h>

#include <string>

#include "common/msgpack_reader.h"

namespace seqflow {
namespace {

TEST(MsgpackMapWriter, WritesItsMembersInKeyOrder) {
  MsgpackMapWriter map;
  map.set("partition_id").string("p");
  map.set("count").integer(3);
  map.set("Z").boolean(true);  // upper case sorts first
  map.set("budget_ms").integer(-1);
  EXPECT_EQ(map.bytes(), std::string("\x84\xa1Z\xc3\xa9"
                                     "budget_ms\xff\xa5"
                                     "count\x03\xac"
                                     "partition_id\xa1p",
                                     37));
  EXPECT_EQ(msgpack_to_value(map.bytes(), 1),
            (Value{{"partition_id", "p"}, {"count", 3}, {"Z", true}, {"budget_ms", -1}}));
}

TEST(MsgpackMapWriter, AKeySetAgainHoldsItsLastValue) {
  MsgpackMapWriter map;
  map.set("k").string("first, and longer than the second");
  map.set("k").integer(2);
  EXPECT_EQ(map.bytes(), std::string("\x81\xa1k\x02", 4));
}

TEST(MsgpackMapWriter, MapsNestAndAnEmptyOneIsAnEmptyMap) {
  MsgpackMapWriter inner;
  EXPECT_TRUE(inner.empty());
  EXPECT_EQ(inner.bytes(), std::string("\x80", 1));
  inner.set("b").nil();
  inner.set("a").value(Value::array({1, "x"}));
  EXPECT_FALSE(inner.empty());
  MsgpackMapWriter outer;
  inner.write(outer.set("inner"));
  outer.set("after").encoded(inner.bytes());
  EXPECT_EQ(msgpack_to_value(outer.bytes(), 3), (Value{{"inner", {{"a", Value::array({1, "x"})}, {"b", nullptr}}},
                                                       {"after", {{"a", Value::array({1, "x"})}, {"b", nullptr}}}}));
}

}  // namespace
}  // namespace seqflow
