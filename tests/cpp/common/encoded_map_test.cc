// The in-place map reader (common/encoded_map.h): keys checked against the
// allowed ones (or passed over), each accessor checking its type and naming
// the map, the key and the problem, nil read as absent by has().
#include "common/encoded_map.h"

#include <gtest/gtest.h>

#include <string>

#include "msgpack_tree.h"
#include "error_matchers.h"

namespace seqflow {
namespace {

using test::throws_invalid;
using test::Tree;

const Tree kHeader{{"name", "p"},
                   {"count", -3},
                   {"big", uint64_t{1} << 63},
                   {"flag", true},
                   {"none", nullptr},
                   {"ids", Tree::numbers(std::vector<uint32_t>{7, 9, 11})},
                   {"names", Tree::array({"a", "b"})},
                   {"metas", Tree::array({Tree{{"k", 1}}, nullptr})},
                   {"inner", Tree{{"x", 1}, {"y", Tree::array({2})}}}};

TEST(EncodedMap, ReadsEachTypeItsAccessorsAskFor) {
  const std::string bytes = kHeader.bytes();
  const EncodedMap map(bytes, 0, "m",
                       {"name", "count", "big", "flag", "none", "ids", "names", "metas", "inner", "absent"});
  EXPECT_EQ(map.text("name"), "p");
  EXPECT_EQ(map.integer("count"), -3);
  EXPECT_EQ(map.unsigned_integer("big"), uint64_t{1} << 63);
  EXPECT_TRUE(map.boolean("flag"));
  EXPECT_EQ(map.numbers<uint32_t>("ids"), (std::vector<uint32_t>{7, 9, 11}));
  EXPECT_EQ(map.texts("names"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(map.objects("metas"), (std::vector<Value>{Value{{"k", 1}}, Value()}));
  EXPECT_EQ(map.decoded("inner"), (Value{{"x", 1}, {"y", Value::array({2})}}));
  EXPECT_EQ(map.elements("names", "must be a list").size(), 2u);
  const auto members = map.members("inner", "must be a map");
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[1].first, "y");
  EXPECT_EQ(map.map("inner", "m's inner", {"x", "y"}).integer("x"), 1);
  EXPECT_TRUE(map.has("name"));
  EXPECT_FALSE(map.has("none")) << "nil reads as not sent";
  EXPECT_FALSE(map.has("absent"));
  EXPECT_FALSE(map.has("not allowed"));
}

TEST(EncodedMap, NamesTheMapTheKeyAndTheProblem) {
  const std::string bytes = kHeader.bytes();
  const EncodedMap map(bytes, 0, "m",
                       {"name", "count", "big", "flag", "none", "ids", "names", "metas", "inner", "absent"});
  EXPECT_TRUE(throws_invalid([&] { map.integer("name"); }, {"m field 'name' must be an integer, got string"}));
  EXPECT_TRUE(throws_invalid([&] { map.integer("big"); }, {"m field 'big' is out of range"}));
  EXPECT_TRUE(throws_invalid([&] { map.unsigned_integer("count"); }, {"'count' must be an unsigned integer, got -3"}));
  EXPECT_TRUE(throws_invalid([&] { map.unsigned_integer("flag"); }, {"must be an unsigned integer, got boolean"}));
  EXPECT_TRUE(throws_invalid([&] { map.text("none"); }, {"'none' must be a string, got null"}));
  EXPECT_TRUE(throws_invalid([&] { map.text("absent"); }, {"m lacks the field 'absent'"}));
  EXPECT_TRUE(throws_invalid([&] { map.numbers<uint64_t>("ids"); }, {"'ids' holds a partial element"}));
  EXPECT_TRUE(throws_invalid([&] { map.binary("names"); }, {"'names' must be a binary array"}));
  EXPECT_TRUE(throws_invalid([&] { map.texts("ids"); }, {"'ids' must be an array of strings"}));
  EXPECT_TRUE(throws_invalid([&] { map.objects("names"); }, {"'names' must be an array of maps"}));
  EXPECT_TRUE(throws_invalid([&] { map.elements("inner", "must be a list"); }, {"'inner' must be a list"}));
  EXPECT_TRUE(throws_invalid([&] { map.members("names", "must be a map"); }, {"'names' must be a map"}));
  EXPECT_TRUE(throws_invalid([&] { map.map("inner", "m's inner", {"x"}); }, {"m's inner has an unknown field 'y'"}));
  EXPECT_TRUE(throws_invalid([&] { EncodedMap(bytes, 0, "m", {"name"}); }, {"m has an unknown field"}));
  const std::string binary_meta = Tree{{"metas", Tree::array({Tree{{"b", Tree::binary("x")}}})}}.bytes();
  EXPECT_TRUE(throws_invalid([&] { EncodedMap(binary_meta, 0, "m", {"metas"}).objects("metas"); },
                             {"m field 'metas'", "binary data"}));
  const std::string not_a_map = Tree::array({1}).bytes();
  EXPECT_TRUE(throws_invalid([&] { EncodedMap(not_a_map, 0, "m", {}); }, {"m must be a map, got array"}));
}

TEST(EncodedMap, CheckpointMapsPassOverKeysTheyDoNotRead) {
  const std::string bytes = kHeader.bytes();
  const EncodedMap map = EncodedMap::skipping_unknown(bytes, 0, "checkpoint", {"name", "later"});
  EXPECT_EQ(map.text("name"), "p");
  EXPECT_FALSE(map.has("later"));
  EXPECT_TRUE(throws_invalid([&] { map.text("count"); }, {"checkpoint lacks the field 'count'"}));
}

TEST(EncodedMap, ARepeatedKeysLastValueWinsAndArraysSplitIntoTheirElements) {
  const std::string repeated("\x82\xa1k\x01\xa1k\x02", 7);
  EXPECT_EQ(EncodedMap(repeated, 0, "m", {"k"}).integer("k"), 2);
  const std::string list = Tree::array({1, "two", Tree::array({3})}).bytes();
  const auto elements = array_elements(list, 1);
  ASSERT_TRUE(elements.has_value());
  ASSERT_EQ(elements->size(), 3u);
  EXPECT_EQ((*elements)[1], Tree("two").bytes());
  EXPECT_EQ((*elements)[2], Tree::array({3}).bytes());
  EXPECT_FALSE(array_elements(Tree(5).bytes(), 1).has_value());
}

}  // namespace
}  // namespace seqflow
