// BatchMeta's operations: selections, chunks, reorder, concat and union cut
// every column alike and keep custom_meta encoded.
#include "seqflow/batch_meta.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace seqflow {
namespace {

using test::throws_code;

// n samples 10, 11, ... of partition "p" with fields a (produced everywhere)
// and b (produced on even positions), custom_meta {"i": position}.
BatchMeta make_meta(size_t n, std::vector<uint64_t> generations = {}) {
  BatchMeta meta;
  meta.field_schema["a"] = FieldSchema{DType::kInt64, {2}};
  meta.field_schema["b"] = FieldSchema{DType::kFloat32, {}};
  for (size_t i = 0; i < n; ++i) {
    meta.global_indexes.push_back(static_cast<int64_t>(10 + i));
    meta.partition_ids.push_back("p");
    meta.production_status.insert(meta.production_status.end(), {1, static_cast<uint8_t>(i % 2 == 0)});
    meta.custom_meta.push_back(Value{{"i", i}});
  }
  meta.generations = std::move(generations);
  return meta;
}

std::vector<int64_t> custom_values(const BatchMeta& meta) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < meta.size(); ++i) out.push_back(meta.custom_meta[i]["i"].as_int());
  return out;
}

TEST(BatchMeta, ChunkSizesAreEqualLargestFirst) {
  EXPECT_EQ(chunk_sizes(7, 3), (std::vector<size_t>{3, 2, 2}));
  EXPECT_EQ(chunk_sizes(2, 4), (std::vector<size_t>{1, 1, 0, 0}));
  EXPECT_TRUE(throws_code([] { chunk_sizes(3, 0); }, ErrorCode::kInvalidArgument, {"parts must be", "got 0"}));
}

TEST(BatchMeta, CommonShapeMarksTheDimsThatDiffer) {
  const std::vector<Shape> same_rank{{2, 3}, {2, 5}, {2, 3}};
  EXPECT_EQ(common_shape(same_rank), (Shape{2, -1}));
  const std::vector<Shape> ranks_differ{{2}, {2, 3}, {2}};
  EXPECT_EQ(common_shape(ranks_differ), (Shape{-1, -1}));
  const std::vector<Shape> one{{4, 1}};
  EXPECT_EQ(common_shape(one), (Shape{4, 1}));
  EXPECT_TRUE(throws_code([] { common_shape({}); }, ErrorCode::kInvalidArgument, {"at least one shape"}));
}

TEST(BatchMeta, QueriesReadTheFieldMatrix) {
  const BatchMeta meta = make_meta(3);
  EXPECT_EQ(meta.ready(), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(meta.produced_fields(), (std::vector<std::string>{"a"}));
  const std::vector<std::string> names{"b", "nope"};
  EXPECT_EQ(meta.field_produced(names), (std::vector<uint8_t>{1, 0, 0, 0, 1, 0}));
  BatchMeta no_matrix = make_meta(2);
  no_matrix.production_status.clear();  // a batch built by hand: nothing produced
  EXPECT_EQ(no_matrix.ready(), (std::vector<uint8_t>{0, 0}));
}

TEST(BatchMeta, SelectSamplesCutsEveryColumn) {
  const BatchMeta meta = make_meta(5, {7, 7, 8, 8, 9});
  const std::vector<int64_t> positions{4, 1, 1};
  const BatchMeta part = meta.select_samples(positions);
  EXPECT_EQ(part.global_indexes, (std::vector<int64_t>{14, 11, 11}));
  EXPECT_EQ(part.generations, (std::vector<uint64_t>{9, 7, 7}));
  EXPECT_EQ(part.partition_ids.run_count(), 1u);
  EXPECT_EQ(part.ready(), (std::vector<uint8_t>{1, 0, 0}));
  EXPECT_EQ(custom_values(part), (std::vector<int64_t>{4, 1, 1}));
  EXPECT_EQ(part.field_schema, meta.field_schema);
  const std::vector<int64_t> bad{0, 5};
  EXPECT_TRUE(throws_code([&] { meta.select_samples(bad); }, ErrorCode::kInvalidArgument,
                          {"sample_indices must lie in [0, 5), got [0, 5]"}));
}

TEST(BatchMeta, SelectFieldsKeepsTheirColumns) {
  const std::vector<std::string> names{"b", "nope"};
  const BatchMeta only_b = make_meta(3).select_fields(names);
  EXPECT_EQ(only_b.field_schema.size(), 1u);
  EXPECT_EQ(only_b.production_status, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(custom_values(only_b), (std::vector<int64_t>{0, 1, 2}));
}

TEST(BatchMeta, ChunkSplitAndPartitionsAreConsecutiveParts) {
  const BatchMeta meta = make_meta(7);
  std::vector<size_t> sizes;
  for (const BatchMeta& part : meta.chunk(3)) sizes.push_back(part.size());
  EXPECT_EQ(sizes, (std::vector<size_t>{3, 2, 2}));
  EXPECT_EQ(custom_values(meta.chunk(3)[1]), (std::vector<int64_t>{3, 4}));
  const std::vector<int64_t> split_sizes{0, 7};
  EXPECT_EQ(meta.split(split_sizes)[1].global_indexes, meta.global_indexes);
  const std::vector<int64_t> short_sizes{2, 2};
  EXPECT_TRUE(throws_code([&] { meta.split(short_sizes); }, ErrorCode::kInvalidArgument,
                          {"sizes [2, 2] must be >= 0 and add up to 7"}));
  EXPECT_TRUE(throws_code([&] { meta.chunk(0); }, ErrorCode::kInvalidArgument, {"chunks must be an integer >= 1"}));

  BatchMeta mixed = make_meta(4);
  mixed.partition_ids = PartitionIdList(std::vector<std::string>{"A", "B", "A", "B"});
  const std::vector<BatchMeta> parts = mixed.chunk_by_partition();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].global_indexes, (std::vector<int64_t>{10, 12}));
  EXPECT_EQ(parts[1].partition_ids[0], "B");
}

TEST(BatchMeta, ReorderIsAPermutationInPlace) {
  BatchMeta meta = make_meta(3);
  const std::vector<int64_t> order{2, 0, 1};
  meta.reorder(order);
  EXPECT_EQ(meta.global_indexes, (std::vector<int64_t>{12, 10, 11}));
  EXPECT_EQ(custom_values(meta), (std::vector<int64_t>{2, 0, 1}));
  const std::vector<int64_t> twice{0, 0, 1}, short_order{0, 1};
  EXPECT_TRUE(throws_code([&] { meta.reorder(twice); }, ErrorCode::kInvalidArgument, {"duplicates"}));
  EXPECT_TRUE(throws_code([&] { meta.reorder(short_order); }, ErrorCode::kInvalidArgument, {"mismatch batch size 3"}));
}

TEST(BatchMeta, ConcatRestoresChunksAndChecksFields) {
  const BatchMeta meta = make_meta(7, {1, 2, 3, 4, 5, 6, 7});
  const std::vector<BatchMeta> parts = meta.chunk(3);
  const BatchMeta empty;
  const std::vector<const BatchMeta*> pointers{&parts[0], &empty, &parts[1], &parts[2]};
  const BatchMeta joined = BatchMeta::concat(pointers, true);
  EXPECT_EQ(joined.global_indexes, meta.global_indexes);
  EXPECT_EQ(joined.generations, meta.generations);
  EXPECT_EQ(joined.production_status, meta.production_status);
  EXPECT_EQ(joined.custom_meta, meta.custom_meta);

  BatchMeta floats = make_meta(1);
  floats.field_schema["a"].dtype = DType::kFloat32;
  floats.generations.clear();
  const std::vector<const BatchMeta*> mismatched{&meta, &floats};
  EXPECT_TRUE(throws_code([&] { BatchMeta::concat(mismatched, true); }, ErrorCode::kInvalidArgument,
                          {"Field 'a' dtype mismatch in concat: chunk[0]=int64, chunk[1]=float32"}));
  const BatchMeta unchecked = BatchMeta::concat(mismatched, false);
  EXPECT_EQ(unchecked.generations.back(), 0u);  // a part without generations: checked by partition only

  const std::vector<std::string> only_a{"a"};
  const BatchMeta fewer = make_meta(1).select_fields(only_a);
  const std::vector<const BatchMeta*> other_fields{&meta, &fewer};
  EXPECT_TRUE(throws_code([&] { BatchMeta::concat(other_fields, true); }, ErrorCode::kInvalidArgument,
                          {"field_names mismatch at chunk[1]: expected ['a', 'b'], got ['a'] (extra [], missing "
                           "['b'])"}));
}

TEST(BatchMeta, ConcatMarksFieldsNestedWhereShapesDiffer) {
  BatchMeta first = make_meta(1), second = make_meta(1);
  second.field_schema["a"].shape = {5};
  const std::vector<const BatchMeta*> parts{&first, &second};
  const FieldSchema merged = BatchMeta::concat(parts, true).field_schema.at("a");
  EXPECT_EQ(merged.shape, (Shape{-1}));
  EXPECT_FALSE(merged.is_nested);
  second.field_schema["a"].is_nested = true;
  EXPECT_TRUE(BatchMeta::concat(parts, true).field_schema.at("a").is_nested);
}

TEST(BatchMeta, UnionTakesTheOtherSidesFieldsAndKeys) {
  const BatchMeta left = make_meta(2);
  BatchMeta right = make_meta(2);
  right.field_schema.erase("a");
  right.field_schema["c"] = FieldSchema{DType::kInt8, {}};
  right.production_status = {0, 1, 1, 1};  // b, c per sample
  right.custom_meta = CustomMetaList();
  right.custom_meta.push_back(Value{{"j", 1}});
  right.custom_meta.push_back(Value::object());
  const BatchMeta both = left.union_with(right);
  EXPECT_EQ(both.field_schema.size(), 3u);
  EXPECT_EQ(both.production_status, (std::vector<uint8_t>{1, 0, 1, 1, 1, 1}));  // a mine, b and c theirs
  EXPECT_EQ(both.custom_meta[0], (Value{{"i", 0}, {"j", 1}}));
  EXPECT_EQ(both.custom_meta[1], (Value{{"i", 1}}));
  EXPECT_EQ(left.union_with(BatchMeta()).global_indexes, left.global_indexes);

  EXPECT_TRUE(throws_code([&] { left.union_with(make_meta(3)); }, ErrorCode::kInvalidArgument,
                          {"global_indexes do not match: self.global_indexes=[10, 11]"}));
  BatchMeta elsewhere = make_meta(2);
  elsewhere.partition_ids = PartitionIdList(2, "q");
  EXPECT_TRUE(throws_code([&] { left.union_with(elsewhere); }, ErrorCode::kInvalidArgument,
                          {"partition_ids do not match: self.partition_ids=['p', 'p'], other.partition_ids=['q', "
                           "'q']"}));
  EXPECT_TRUE(throws_code(
      [&] {
        make_meta(2, {1, 1}).union_with(make_meta(2, {1, 2}));
      },
      ErrorCode::kInvalidArgument, {"generations do not match (one side is stale)"}));
}

}  // namespace
}  // namespace seqflow
