// Helpers of the data-plane tests: building columns from typed values and
// checking seqflow errors by code and message fragments.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "error_matchers.h"
#include "seqflow/error.h"
#include "seqflow/tensor.h"

namespace seqflow::test {

using Bytes = std::vector<std::byte>;

template <typename T>
Bytes bytes_of(const std::vector<T>& values) {
  Bytes out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline Bytes bytes_of(std::string_view text) {
  const auto bytes = std::as_bytes(std::span(text.data(), text.size()));
  return {bytes.begin(), bytes.end()};
}

inline Bytes to_bytes(std::span<const std::byte> bytes) { return {bytes.begin(), bytes.end()}; }

// One buffer holding every sample back to back, as one put delivers them.
inline Column column_of(std::string field, DType dtype, std::vector<Shape> shapes, const std::vector<Bytes>& samples,
                        bool is_object = false) {
  Column column;
  column.field = std::move(field);
  column.dtype = dtype;
  column.is_object = is_object;
  column.shapes = std::move(shapes);
  Bytes all;
  column.offsets.push_back(0);
  for (const Bytes& sample : samples) {
    all.insert(all.end(), sample.begin(), sample.end());
    column.offsets.push_back(all.size());
  }
  column.buffer = Buffer::copy_of(all);
  return column;
}

// One int64 value per sample, shape {1}.
inline Column int64_column(std::string field, const std::vector<int64_t>& values) {
  std::vector<Bytes> samples;
  for (int64_t v : values) samples.push_back(bytes_of(std::vector<int64_t>{v}));
  return column_of(std::move(field), DType::kInt64, {{1}}, samples);
}

inline int64_t int64_of(const SampleView& view) {
  int64_t v = 0;
  std::memcpy(&v, view.bytes().data(), sizeof v);
  return v;
}

// The field list of a get of field "x", the one object_column("x", ...) puts.
inline const std::vector<std::string> kFieldX = {"x"};

inline Column object_column(std::string field, const std::vector<std::string>& objects) {
  std::vector<Shape> shapes;
  std::vector<Bytes> samples;
  for (const std::string& object : objects) {
    shapes.push_back({static_cast<int64_t>(object.size())});
    samples.push_back(bytes_of(object));
  }
  return column_of(std::move(field), DType::kUInt8, std::move(shapes), samples, true);
}

inline std::string text_of(const SampleView& view) {
  return {reinterpret_cast<const char*>(view.bytes().data()), view.nbytes};
}

// A valid two-sample int32 column named "x" (samples of shapes {2} and {1})
// for each invalidation below.
inline Column good_column() {
  return column_of("x", DType::kInt32, {{2}, {1}},
                   {bytes_of(std::vector<int32_t>{1, 2}), bytes_of(std::vector<int32_t>{3})});
}

struct BadColumnCase {
  const char* name;
  std::function<void(Column&)> spoil;
  std::vector<std::string> fragments;
};

inline std::vector<BadColumnCase> bad_column_cases() {
  return {
      {"empty field", [](Column& c) { c.field.clear(); }, {"field name is empty"}},
      {"no offsets", [](Column& c) { c.offsets.clear(); }, {"\"x\"", "offsets is empty"}},
      {"decreasing offsets",
       [](Column& c) {
         c.offsets = {0, 8, 4};
       },
       {"\"x\"", "sample 1", "decrease"}},
      {"offset beyond buffer", [](Column& c) { c.offsets[2] = 16; }, {"\"x\"", "sample 1", "beyond"}},
      {"first offset beyond buffer", [](Column& c) { c.offsets[0] = 13; }, {"\"x\"", "offsets[0]"}},
      {"wrong nbytes", [](Column& c) { c.shapes[1] = {2}; }, {"\"x\"", "sample 1", "needs 8 bytes", "has 4"}},
      {"wrong shape count", [](Column& c) { c.shapes.push_back({1}); }, {"\"x\"", "3 shapes for 2 samples"}},
      {"no shapes", [](Column& c) { c.shapes.clear(); }, {"\"x\"", "0 shapes"}},
      {"negative dim", [](Column& c) { c.shapes[0] = {-2}; }, {"\"x\"", "sample 0", "negative"}},
      {"null buffer", [](Column& c) { c.buffer = nullptr; }, {"\"x\"", "buffer is null"}},
      {"unknown dtype", [](Column& c) { c.dtype = static_cast<DType>(42); }, {"\"x\"", "sample 0", "42"}},
      {"object of int32", [](Column& c) { c.is_object = true; }, {"\"x\"", "sample 0", "uint8"}},
      {"too many dims", [](Column& c) { c.shapes[1] = Shape(65, 1); }, {"\"x\"", "sample 1", "65 dimensions"}},
  };
}

// The seqflow::Error `fn` throws, or nullopt; other exceptions propagate.
inline std::optional<Error> error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& error) {
    return error;
  }
  return std::nullopt;
}

// throws_code (error_matchers.h) with the code first and owned fragments.
inline ::testing::AssertionResult throws_error(ErrorCode code, const std::function<void()>& fn,
                                               const std::vector<std::string>& fragments) {
  return throws_code(fn, code, std::vector<std::string_view>(fragments.begin(), fragments.end()));
}

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "seqflow-storage-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(std::string_view name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace seqflow::test
