// Columns: samples as views of one buffer, and validation naming the field
// and the sample.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "seqflow/error.h"
#include "seqflow/tensor.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

TEST(TensorColumn, FixedShapeSamplesAreViewsOfTheBuffer) {
  Column column =
      column_of("x", DType::kFloat32, {{2}}, {bytes_of(std::vector<float>{1, 2}), bytes_of(std::vector<float>{3, 4})});
  column.validate();
  ASSERT_EQ(column.sample_count(), 2u);
  SampleView second = column.sample(1);
  EXPECT_EQ(second.buffer, column.buffer);
  EXPECT_EQ(second.offset, 8u);
  EXPECT_EQ(second.nbytes, 8u);
  EXPECT_EQ(second.bytes().data(), column.buffer->data + 8);
  EXPECT_EQ(second.shape, (Shape{2}));
  EXPECT_EQ(second.dtype, DType::kFloat32);
  EXPECT_FALSE(second.is_object);
}

TEST(TensorColumn, PerSampleShapes) {
  Column column = column_of("ids", DType::kInt64, {{3}, {0}, {1, 2}},
                            {bytes_of(std::vector<int64_t>{1, 2, 3}), {}, bytes_of(std::vector<int64_t>{4, 5})});
  column.validate();
  EXPECT_EQ(column.sample(0).shape, (Shape{3}));
  EXPECT_EQ(column.sample(1).nbytes, 0u);
  EXPECT_EQ(column.sample(2).shape, (Shape{1, 2}));
  EXPECT_EQ(column.sample(2).offset, 24u);
}

TEST(TensorColumn, ObjectsAndEmptyColumnsAreValid) {
  Column objects = object_column("text", {"hello", "", "world!"});
  objects.validate();
  EXPECT_EQ(text_of(objects.sample(2)), "world!");
  EXPECT_TRUE(objects.sample(2).is_object);

  Column empty;
  empty.field = "nothing";
  empty.offsets = {0};
  empty.validate();
  EXPECT_EQ(empty.sample_count(), 0u);

  Column scalars = column_of("score", DType::kFloat64, {{}}, {bytes_of(std::vector<double>{0.5})});
  scalars.validate();
}

TEST(TensorColumn, SampleOutOfRangeThrows) {
  Column column = column_of("x", DType::kUInt8, {{1}}, {{std::byte{1}}});
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { column.sample(1); }, {"\"x\"", "sample 1", "1 samples"}));
}

TEST(TensorColumn, ValidateNamesTheFieldAndTheSample) {
  good_column().validate();
  for (const BadColumnCase& c : bad_column_cases()) {
    Column column = good_column();
    c.spoil(column);
    EXPECT_TRUE(throws_error(
        ErrorCode::kInvalidArgument, [&] { column.validate(); }, c.fragments))
        << c.name;
  }
}

TEST(TensorColumn, ObjectShapeMustBeItsByteCount) {
  Column objects = object_column("text", {"abc", "de"});
  objects.shapes[1] = {3};
  EXPECT_TRUE(
      throws_error(ErrorCode::kInvalidArgument, [&] { objects.validate(); }, {"\"text\"", "sample 1", "shape [2]"}));
  objects = object_column("text", {"abc"});
  objects.dtype = DType::kInt8;
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { objects.validate(); },
                           {"\"text\"", "sample 0", "uint8", "int8"}));
}

}  // namespace
}  // namespace seqflow::test
