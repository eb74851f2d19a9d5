// The name rule (core/name_rule.h): what it refuses and accepts, and the
// controller applying it to partition ids, fields, keys and task names
// before it changes anything.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "controller_test_support.h"
#include "core/name_rule.h"
#include "seqflow/controller.h"

namespace seqflow {
namespace {

using test::fetch_request;
using test::fields_of;
using test::throws_invalid;

struct BadName {
  std::string name;
  std::string message;
};

const std::vector<BadName>& bad_names() {
  static const std::vector<BadName> names = {
      {"", "x must not be empty, got ''"},
      {std::string("a\0b", 3), "x must not contain NUL ('\\x00'), got 'a\\x00b'"},
      {"\xED\xA0\x80", "x must be valid UTF-8, got '\\xed\\xa0\\x80'"},  // an encoded surrogate
      {"\xC0\xAF", "x must be valid UTF-8"},                             // overlong '/'
      {"\xF4\x90\x80\x80", "x must be valid UTF-8"},                     // beyond U+10FFFF
      {"ab\xE2\x82", "x must be valid UTF-8"},                           // cut off
      {"\xFF", "x must be valid UTF-8"},
      {std::string(kMaxNameBytes + 1, 'n'), "x must be at most 1024 bytes of UTF-8, has 1025, got 'nnn"},
  };
  return names;
}

TEST(NameRule, RefusesEachBadNameNamingParameterAndValue) {
  for (const BadName& bad : bad_names()) {
    EXPECT_TRUE(throws_invalid([&] { core::check_name(bad.name, "x"); }, {bad.message})) << bad.message;
  }
}

TEST(NameRule, AcceptsUtf8UpToTheLimit) {
  for (const std::string& name : {std::string("p"), std::string("caf\xC3\xA9"), std::string("\xE2\x82\xAC"),
                                  std::string("\xF0\x9F\x98\x80"), std::string(kMaxNameBytes, 'n')}) {
    EXPECT_NO_THROW(core::check_name(name, "x")) << name;
  }
}

TEST(NameRule, ControllerRefusesBadNamesAndChangesNothing) {
  Controller controller;
  test::put(controller, "p", 2, {"x"});
  controller.kv_resolve("kv", std::vector<std::string>{"k"}, {});
  for (const BadName& bad : bad_names()) {
    const std::vector<std::string> keys = {"k2", bad.name};
    EXPECT_TRUE(throws_invalid([&] { controller.insert(bad.name, 1); }, {"partition_id", "must"}));
    EXPECT_TRUE(throws_invalid([&] { controller.kv_resolve(bad.name, std::vector<std::string>{"k"}, {}); },
                               {"partition_id", "must"}));
    EXPECT_TRUE(throws_invalid([&] { controller.kv_resolve("kv", keys, {}); }, {"keys[1]", "must"}));
    EXPECT_TRUE(throws_invalid(
        [&] {
          controller.get_meta(fetch_request("p", "t", {"x", bad.name}, 1));
        },
        {"fields[1]", "must"}));
    EXPECT_TRUE(
        throws_invalid([&] { controller.get_meta(fetch_request(bad.name, "t", {"x"}, 1)); }, {"partition_id", "must"}));
    if (!bad.name.empty()) {  // an empty task name is no task outside fetch mode, and refused in it
      EXPECT_TRUE(
          throws_invalid([&] { controller.get_meta(fetch_request("p", bad.name, {"x"}, 1)); }, {"task_name", "must"}));
    }
    const BatchMeta inserted = controller.insert("q", 1);
    EXPECT_TRUE(
        throws_invalid([&] { controller.mark_produced("q", inserted.global_indexes, {}, fields_of({bad.name}), {}); },
                       {"field name", "must"}));
    controller.clear_partition("q");
  }
  std::vector<std::string> partitions = controller.partition_list();
  std::sort(partitions.begin(), partitions.end());
  EXPECT_EQ(partitions, (std::vector<std::string>{"kv", "p"}));
  const std::string kv = "kv";
  EXPECT_EQ(test::keys_of(controller.kv_list(&kv).at(0)), std::vector<std::string>{"k"});
  EXPECT_EQ(controller.get_meta(fetch_request("p", "t", {"x"}, 2)).size(), 2u);
}

}  // namespace
}  // namespace seqflow
