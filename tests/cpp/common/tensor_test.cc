// dtypes, shapes and buffers (columns, whose methods the storage layer
// defines: storage/column_test.cc).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "seqflow/error.h"
#include "seqflow/tensor.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

struct DTypeCase {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeCase kEveryDType[] = {
    {DType::kBool, "bool", 1},       {DType::kUInt8, "uint8", 1},       {DType::kInt8, "int8", 1},
    {DType::kInt16, "int16", 2},     {DType::kInt32, "int32", 4},       {DType::kInt64, "int64", 8},
    {DType::kFloat16, "float16", 2}, {DType::kBFloat16, "bfloat16", 2}, {DType::kFloat32, "float32", 4},
    {DType::kFloat64, "float64", 8},
};

TEST(TensorDType, SizesAndNamesOfEveryDType) {
  for (const DTypeCase& c : kEveryDType) {
    EXPECT_EQ(dtype_size(c.dtype), c.size) << c.name;
    EXPECT_EQ(dtype_name(c.dtype), c.name);
  }
}

TEST(TensorDType, ParseReadsNumpyAndTorchSpellings) {
  for (const DTypeCase& c : kEveryDType) {
    EXPECT_EQ(parse_dtype(c.name), c.dtype) << c.name;
    EXPECT_EQ(parse_dtype(std::string("torch.") + c.name), c.dtype) << c.name;
  }
  EXPECT_EQ(parse_dtype("torch.float"), DType::kFloat32);
  EXPECT_EQ(parse_dtype("torch.half"), DType::kFloat16);
  EXPECT_EQ(parse_dtype("torch.double"), DType::kFloat64);
  EXPECT_EQ(parse_dtype("torch.long"), DType::kInt64);
  EXPECT_EQ(parse_dtype("torch.int"), DType::kInt32);
  EXPECT_EQ(parse_dtype("torch.short"), DType::kInt16);
  EXPECT_EQ(parse_dtype("half"), DType::kFloat16);
  EXPECT_EQ(parse_dtype("double"), DType::kFloat64);
}

TEST(TensorDType, ParseRejectsUnknownAndAmbiguousNames) {
  // Bare "float" / "int" mean different widths in numpy and torch.
  for (const char* name : {"float", "int", "complex64", "", "Float32", "torch.", "numpy.float32"}) {
    EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { parse_dtype(name); },
                             {"unknown dtype", std::string("\"") + name + "\"", "bfloat16"}))
        << name;
  }
}

TEST(TensorDType, UnknownCodeThrows) {
  const auto bad = static_cast<DType>(99);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { dtype_size(bad); }, {"99"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { dtype_name(bad); }, {"99"}));
}

TEST(TensorShape, ElementCount) {
  EXPECT_EQ(element_count({}), 1);  // a scalar
  EXPECT_EQ(element_count({7}), 7);
  EXPECT_EQ(element_count({2, 3, 4}), 24);
  EXPECT_EQ(element_count({3, 0, 5}), 0);
}

TEST(TensorShape, NegativeOrOverflowingShapesThrow) {
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [] { element_count({2, -1}); }, {"dimension 1", "-1"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [] { element_count({INT64_MAX / 2, 3}); }, {"overflows"}));
}

TEST(TensorBuffer, CopyOfOwnsAnAlignedCopy) {
  Bytes source = bytes_of(std::vector<int32_t>{1, 2, 3});
  auto buffer = Buffer::copy_of(source);
  source[0] = std::byte{9};
  ASSERT_EQ(buffer->size, 12u);
  EXPECT_NE(buffer->data, source.data());
  EXPECT_EQ(buffer->data[0], std::byte{1});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data) % 64, 0u);
  EXPECT_TRUE(buffer->owner);
}

TEST(TensorBuffer, EmptyCopyHasData) {
  auto buffer = Buffer::copy_of({});
  EXPECT_EQ(buffer->size, 0u);
  EXPECT_NE(buffer->data, nullptr);
}

}  // namespace
}  // namespace seqflow::test
