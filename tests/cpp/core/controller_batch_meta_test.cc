// BatchMeta's compact members: PartitionIdList (runs of equal names),
// CustomMetaList (MessagePack entries in one buffer, decoded on access), and
// production_status (one byte per sample and field, fields by name) as the
// controller fills them.
#include <gtest/gtest.h>

#include "controller_test_support.h"
#include "seqflow/controller.h"

namespace seqflow {
namespace {

using test::fetch_request;
using test::put;
using test::throws_code;

TEST(ControllerBatchMeta, PartitionIdsKeepOneEntryPerRun) {
  PartitionIdList ids;
  EXPECT_TRUE(ids.empty());
  ids.append(3, "a");
  ids.append(0, "b");  // nothing: no empty run
  ids.push_back("a");  // extends the run
  ids.append(2, "b");
  ids.push_back("a");
  ASSERT_EQ(ids.size(), 7u);
  ASSERT_EQ(ids.run_count(), 3u);
  EXPECT_EQ(ids.run_name(0), "a");
  EXPECT_EQ(ids.run_end(0), 4u);
  EXPECT_EQ(ids.run_name(1), "b");
  EXPECT_EQ(ids.run_end(1), 6u);
  EXPECT_EQ(ids.run_end(2), 7u);
  const std::vector<std::string> expected = {"a", "a", "a", "a", "b", "b", "a"};
  EXPECT_EQ(ids.to_vector(), expected);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(ids[i], expected[i]) << "sample " << i;
  // Built from names, the runs are the same.
  EXPECT_EQ(PartitionIdList(expected), ids);
  EXPECT_EQ(PartitionIdList(2, "x").to_vector(), (std::vector<std::string>{"x", "x"}));
}

TEST(ControllerBatchMeta, CustomMetaRoundTripsAndEmptyObjectsTakeNoBytes) {
  CustomMetaList list;
  list.push_back(Value{{"total_lengths", 17}, {"tag", "x"}});
  list.push_back(Value::object());
  list.push_back(Value{{"nested", {{"a", Value::array({1, 2.5, nullptr, true})}}}});
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0], (Value{{"total_lengths", 17}, {"tag", "x"}}));
  EXPECT_EQ(list[1], Value::object());
  EXPECT_TRUE(list.encoded(1).empty());
  EXPECT_EQ(list[2].at("nested").at("a").at(1), 2.5);
  EXPECT_EQ(list.offsets().front(), 0u);
  EXPECT_EQ(list.offsets().back(), list.bytes().size());

  const CustomMetaList blank(4);
  ASSERT_EQ(blank.size(), 4u);
  for (size_t i = 0; i < blank.size(); ++i) EXPECT_EQ(blank[i], Value::object());
  EXPECT_TRUE(CustomMetaList().empty());

  EXPECT_TRUE(throws_code([&] { list.push_back(Value::array()); }, ErrorCode::kInvalidArgument,
                          {"custom_meta[3]", "must be an object", "array"}));
  EXPECT_EQ(list.size(), 3u);

  // Encoded bytes copied entry by entry give the same list.
  CustomMetaList copy;
  for (size_t i = 0; i < list.size(); ++i) copy.push_back_encoded(list.encoded(i));
  EXPECT_EQ(copy, list);
}

TEST(ControllerBatchMeta, CustomMetaFromTheWireIsChecked) {
  CustomMetaList list;
  list.push_back(Value{{"k", 1}});
  list.push_back(Value::object());
  list.push_back(Value{{"k", 2}});
  const CustomMetaList same = CustomMetaList::from_encoded(list.bytes(), list.offsets());
  EXPECT_EQ(same, list);
  EXPECT_EQ(same[2], (Value{{"k", 2}}));

  const std::string bytes = list.bytes();
  const auto n = static_cast<uint32_t>(bytes.size());
  EXPECT_TRUE(throws_code([&] { CustomMetaList::from_encoded(bytes, {}); }, ErrorCode::kInvalidArgument,
                          {"offsets must start at 0 and end at the byte count"}));
  EXPECT_TRUE(throws_code(
      [&] {
        CustomMetaList::from_encoded(bytes, {1, n});
      },
      ErrorCode::kInvalidArgument, {"start at 0"}));
  EXPECT_TRUE(throws_code(
      [&] {
        CustomMetaList::from_encoded(bytes, {0, n - 1});
      },
      ErrorCode::kInvalidArgument, {"byte count " + std::to_string(n)}));
  EXPECT_TRUE(throws_code(
      [&] {
        CustomMetaList::from_encoded(bytes, {0, n, 2, n});
      },
      ErrorCode::kInvalidArgument, {"must ascend, entry 2 is 2"}));
  // A valid MessagePack value that is not a map, and bytes that are no value.
  const std::string number = "\x05";  // MessagePack's 5
  EXPECT_TRUE(throws_code(
      [&] {
        CustomMetaList::from_encoded(number, {0, 1});
      },
      ErrorCode::kInvalidArgument, {"custom_meta[0]", "MessagePack map"}));
  EXPECT_TRUE(throws_code(
      [&] {
        CustomMetaList::from_encoded(std::string("\x81", 1), {0, 1});
      },
      ErrorCode::kInvalidArgument, {"custom_meta[0]"}));
}

TEST(ControllerBatchMeta, CustomMetaMergesKeyByKey) {
  CustomMetaList list;
  list.push_back(Value{{"a", 1}, {"b", 2}});
  list.push_back(Value{{"a", 3}});
  EXPECT_EQ(list.merged({}), list);
  const std::vector<Value> updates = {Value{{"b", 20}, {"c", 30}}, Value::object()};
  const CustomMetaList merged = list.merged(updates);
  EXPECT_EQ(merged[0], (Value{{"a", 1}, {"b", 20}, {"c", 30}}));
  EXPECT_EQ(merged.encoded(1), list.encoded(1));    // no update: the same bytes
  EXPECT_EQ(list[0], (Value{{"a", 1}, {"b", 2}}));  // the source is unchanged
  const std::vector<Value> one = {Value::object()};
  EXPECT_TRUE(throws_code([&] { (void)list.merged(one); }, ErrorCode::kInvalidArgument, {"1 entries for 2 samples"}));
}

TEST(ControllerBatchMeta, FetchFillsEveryMemberPerSample) {
  Controller controller;
  const auto indexes =
      put(controller, "p", 3, {"b", "a"}, {Value{{"total_lengths", 5}}, Value::object(), Value{{"g", "x"}}});
  const BatchMeta meta = controller.get_meta(fetch_request("p", "t", {"b", "a"}, 3));
  ASSERT_EQ(meta.size(), 3u);
  EXPECT_EQ(meta.global_indexes, indexes);
  EXPECT_EQ(meta.partition_ids.run_count(), 1u);
  EXPECT_EQ(meta.partition_ids.to_vector(), std::vector<std::string>(3, "p"));
  ASSERT_EQ(meta.custom_meta.size(), 3u);
  EXPECT_EQ(meta.custom_meta[0], (Value{{"total_lengths", 5}}));
  EXPECT_EQ(meta.custom_meta[1], Value::object());
  EXPECT_EQ(meta.custom_meta[2], (Value{{"g", "x"}}));
  ASSERT_EQ(meta.field_schema.size(), 2u);
  EXPECT_EQ(meta.field_schema.begin()->first, "a");
  EXPECT_EQ(meta.production_status, std::vector<uint8_t>(6, 1));
}

TEST(ControllerBatchMeta, ProductionStatusRowsFollowFieldNames) {
  Controller controller;
  const BatchMeta keyed = controller.kv_resolve("p", std::vector<std::string>{"k0", "k1"}, {});
  controller.mark_produced("p", std::vector<int64_t>{keyed.global_indexes[0]}, {}, test::fields_of({"z"}), {});
  controller.mark_produced("p", std::vector<int64_t>{keyed.global_indexes[1]}, {}, test::fields_of({"a"}), {});
  // Every field of the partition, by name (a, z); one row per sample in key order.
  const BatchMeta meta = controller.kv_lookup("p", std::vector<std::string>{"k1", "k0"});
  ASSERT_EQ(meta.size(), 2u);
  ASSERT_EQ(meta.field_schema.size(), 2u);
  EXPECT_EQ(meta.field_schema.begin()->first, "a");
  EXPECT_EQ(meta.production_status, (std::vector<uint8_t>{1, 0, 0, 1}));
  EXPECT_TRUE(meta.produced(0, 0));
  EXPECT_FALSE(meta.produced(0, 1));
  EXPECT_FALSE(meta.produced(1, 0));
  EXPECT_TRUE(meta.produced(1, 1));
}

}  // namespace
}  // namespace seqflow
