// StorageUnit: values, views, overwrites, capacity, errors and checkpoints.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "durable/checksum.h"
#include "durable/framed_file.h"
#include "seqflow/error.h"
#include "seqflow/storage.h"
#include "sample_keys_support.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

std::vector<int64_t> indexes(std::initializer_list<int64_t> values) { return values; }

// Each dtype's samples as raw bytes: a fixed {2, 3} shape, values 0..5 + sample.
Column pattern_column(DType dtype, size_t samples) {
  const size_t nbytes = 6 * dtype_size(dtype);
  std::vector<Bytes> values;
  for (size_t s = 0; s < samples; ++s) {
    Bytes bytes(nbytes);
    for (size_t b = 0; b < nbytes; ++b) bytes[b] = static_cast<std::byte>((b * 7 + s * 13) & 0x7f);
    values.push_back(bytes);
  }
  return column_of(std::string(dtype_name(dtype)), dtype, {{2, 3}}, values);
}

constexpr DType kEveryDType[] = {DType::kBool,  DType::kUInt8,   DType::kInt8,     DType::kInt16,   DType::kInt32,
                                 DType::kInt64, DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};

void expect_same_value(const SampleView& got, const Column& column, size_t i) {
  const SampleView want = column.sample(i);
  EXPECT_EQ(got.dtype, want.dtype);
  EXPECT_EQ(got.shape, want.shape);
  EXPECT_EQ(got.is_object, want.is_object);
  EXPECT_EQ(to_bytes(got.bytes()), to_bytes(want.bytes()));
}

// Content of a unit, for "nothing changed" checks: every value of these
// indexes and fields, or "missing".
std::vector<std::string> content_of(const StorageUnit& unit, std::span<const int64_t> gis,
                                    const std::vector<std::string>& fields) {
  std::vector<std::string> out;
  for (int64_t gi : gis) {
    for (const std::string& field : fields) {
      const int64_t one[] = {gi};
      const std::string names[] = {field};
      try {
        const SampleView view = unit.get(samples_of(one), names)[0][0];
        out.push_back(std::string(dtype_name(view.dtype)) + ":" + text_of(view));
      } catch (const Error&) {
        out.push_back("missing");
      }
    }
  }
  return out;
}

TEST(StorageUnit, EveryDTypeRoundTrips) {
  StorageUnit unit;
  std::vector<Column> columns;
  std::vector<std::string> fields;
  for (DType dtype : kEveryDType) {
    columns.push_back(pattern_column(dtype, 3));
    fields.push_back(columns.back().field);
  }
  const auto gis = indexes({10, 2, 7});
  unit.put(samples_of(gis), columns);
  const auto rows = unit.get(samples_of(gis), fields);
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(rows[i].size(), columns.size());
    for (size_t f = 0; f < columns.size(); ++f) {
      SCOPED_TRACE(fields[f]);
      expect_same_value(rows[i][f], columns[f], i);
    }
  }
  EXPECT_EQ(unit.stats().samples, 3u);
  uint64_t bytes = 0;
  for (DType dtype : kEveryDType) bytes += 3 * 6 * dtype_size(dtype);
  EXPECT_EQ(unit.stats().bytes, bytes);
}

TEST(StorageUnit, GetRowsFollowTheRequestOrder) {
  StorageUnit unit;
  Column a =
      column_of("a", DType::kInt64, {{1}}, {bytes_of(std::vector<int64_t>{100}), bytes_of(std::vector<int64_t>{101})});
  Column b = object_column("b", {"first", "second"});
  unit.put(samples_of(indexes({5, 6})), {a, b});
  const std::vector<std::string> fields = {"b", "a", "b"};
  const auto rows = unit.get(samples_of(indexes({6, 5, 6})), fields);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(text_of(rows[0][0]), "second");
  expect_same_value(rows[0][1], a, 1);
  EXPECT_EQ(text_of(rows[1][0]), "first");
  expect_same_value(rows[1][1], a, 0);
  EXPECT_EQ(text_of(rows[2][2]), "second");
}

TEST(StorageUnit, PerSampleShapesAndObjects) {
  StorageUnit unit;
  Column tokens = column_of("tokens", DType::kInt32, {{3}, {0}, {1, 2}},
                            {bytes_of(std::vector<int32_t>{1, 2, 3}), {}, bytes_of(std::vector<int32_t>{4, 5})});
  Column text = object_column("text", {"a", "", "long text \xff\x00 with bytes"});
  unit.put(samples_of(indexes({0, 1, 2})), {tokens, text});
  const std::vector<std::string> fields = {"tokens", "text"};
  const auto rows = unit.get(samples_of(indexes({0, 1, 2})), fields);
  for (size_t i = 0; i < 3; ++i) {
    expect_same_value(rows[i][0], tokens, i);
    expect_same_value(rows[i][1], text, i);
    EXPECT_TRUE(rows[i][1].is_object);
    EXPECT_EQ(rows[i][1].dtype, DType::kUInt8);
  }
  EXPECT_EQ(rows[1][0].shape, (Shape{0}));
  EXPECT_EQ(rows[2][0].shape, (Shape{1, 2}));
  EXPECT_EQ(unit.stats().bytes, 12u + 0 + 8 + 1 + 0 + text.sample(2).nbytes);
}

TEST(StorageUnit, OnePutSharesOneBufferAndNoCopy) {
  StorageUnit unit;
  Column column = pattern_column(DType::kFloat32, 4);
  unit.put(samples_of(indexes({0, 1, 2, 3})), {column});
  const std::vector<std::string> fields = {"float32"};
  const auto rows = unit.get(samples_of(indexes({3, 0})), fields);
  EXPECT_EQ(rows[0][0].buffer, column.buffer);
  EXPECT_EQ(rows[1][0].buffer, column.buffer);
  EXPECT_EQ(rows[0][0].bytes().data(), column.buffer->data + column.offsets[3]);
  EXPECT_EQ(rows[1][0].bytes().data(), column.buffer->data);
  // The column, four stored views, two read views: storage holds no other copy.
  EXPECT_EQ(column.buffer.use_count(), 1 + 4 + 2);
}

TEST(StorageUnit, ViewsOutliveClearAndTheWriter) {
  StorageUnit unit;
  std::vector<std::vector<SampleView>> rows;
  const std::byte* data = nullptr;
  {
    Column column = object_column("text", {"kept alive", "other"});
    data = column.buffer->data;
    unit.put(samples_of(indexes({4, 5})), {column});
    const std::vector<std::string> fields = {"text"};
    rows = unit.get(samples_of(indexes({4})), fields);
  }
  std::weak_ptr<const Buffer> weak = rows[0][0].buffer;
  unit.clear(indexes({4, 5}));
  unit.clear_all();
  EXPECT_EQ(unit.stats().samples, 0u);
  ASSERT_FALSE(weak.expired());
  EXPECT_EQ(rows[0][0].bytes().data(), data);
  EXPECT_EQ(text_of(rows[0][0]), "kept alive");
  rows.clear();
  EXPECT_TRUE(weak.expired());  // the last view was the last owner
}

TEST(StorageUnit, OverwriteReplacesTheValueAndItsBytes) {
  StorageUnit unit;
  unit.put(samples_of(indexes({1, 2})), {object_column("x", {"aaaa", "bb"}), object_column("y", {"k", "l"})});
  EXPECT_EQ(unit.stats().bytes, 8u);
  Column newer = object_column("x", {"cccccc"});
  std::weak_ptr<const Buffer> old = unit.get(samples_of(indexes({1})), kFieldX)[0][0].buffer;
  unit.put(samples_of(indexes({1})), {newer});
  EXPECT_EQ(text_of(unit.get(samples_of(indexes({1})), kFieldX)[0][0]), "cccccc");
  EXPECT_EQ(text_of(unit.get(samples_of(indexes({2})), kFieldX)[0][0]), "bb");
  const std::vector<std::string> y = {"y"};
  EXPECT_EQ(text_of(unit.get(samples_of(indexes({1})), y)[0][0]), "k");  // other fields stay
  EXPECT_EQ(unit.stats().bytes, 8u - 4 + 6);
  EXPECT_EQ(unit.stats().samples, 2u);
  EXPECT_FALSE(old.expired());  // index 2 still uses the first put's buffer
  unit.put(samples_of(indexes({2})), {object_column("x", {"d"})});
  unit.put(samples_of(indexes({1, 2})), {object_column("y", {"m", "n"})});
  EXPECT_TRUE(old.expired());  // no slice of the first put is left
  EXPECT_EQ(unit.stats().bytes, 6u + 1 + 1 + 1);
}

TEST(StorageUnit, ClearReleasesBytesAndIgnoresUnknownIndexes) {
  StorageUnit unit;
  unit.put(samples_of(indexes({1, 2, 3})), {object_column("x", {"a", "bb", "ccc"})});
  unit.clear(indexes({2, 99, 2}));
  EXPECT_EQ(unit.stats().samples, 2u);
  EXPECT_EQ(unit.stats().bytes, 4u);
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample, [&] { unit.get(samples_of(indexes({2})), kFieldX); },
                           {"global index 2", "no data"}));
  unit.clear_all();
  EXPECT_EQ(unit.stats().samples, 0u);
  EXPECT_EQ(unit.stats().bytes, 0u);
  unit.put(samples_of(indexes({2})), {object_column("x", {"again"})});  // a released index is reused
  EXPECT_EQ(text_of(unit.get(samples_of(indexes({2})), kFieldX)[0][0]), "again");
}

// A drop owed since a cut names the generations it releases, and with them
// every older one: data a newer sample put under a reused index stays.
TEST(StorageUnit, ClearGenerationsDropsThoseAndOlderGenerationsOnly) {
  StorageUnit unit;
  unit.put(samples_of(indexes({1, 2}), 5), {object_column("x", {"old", "old"})});
  unit.put(samples_of(indexes({3}), 9), {object_column("x", {"new"})});
  const std::vector<int64_t> owed = {1, 3};
  const std::vector<uint64_t> generations = {5, 5};  // index 3 holds generation 9 by now
  unit.clear_generations(owed, generations);
  EXPECT_EQ(unit.stats().samples, 2u);
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample, [&] { unit.get(samples_of(indexes({1}), 5), kFieldX); },
                           {"global index 1", "no data"}));
  EXPECT_EQ(text_of(unit.get(samples_of(indexes({3}), 9), kFieldX)[0][0]), "new");
  const std::vector<uint64_t> one = {5};
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.clear_generations(owed, one); },
                           {"1 generations for 2 global indexes"}));
  // An older sample's data under a later released generation goes too.
  unit.put(samples_of(indexes({5}), 3), {object_column("x", {"older"})});
  unit.clear_generations(std::vector<int64_t>{5}, std::vector<uint64_t>{8});
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample, [&] { unit.get(samples_of(indexes({5}), 3), kFieldX); },
                           {"global index 5", "no data"}));
  // Generation 0 (from a checkpoint that kept none) belongs to any sample.
  unit.put(samples_of(indexes({4}), 0), {object_column("x", {"unknown"})});
  const std::vector<int64_t> four = {4};
  const std::vector<uint64_t> any = {7};
  ASSERT_EQ(unit.stats().samples, 3u);
  unit.clear_generations(four, any);
  EXPECT_EQ(unit.stats().samples, 2u);
}

TEST(StorageUnit, MissingIndexIsStaleMissingFieldIsNotFound) {
  StorageUnit unit;
  unit.put(samples_of(indexes({7})), {object_column("x", {"v"})});
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample,
                           [&] {
                             unit.get(samples_of(indexes({7, 8})), kFieldX);
                           },
                           {"global index 8", "partition 'p'", "no data"}));
  const std::vector<std::string> fields = {"x", "responses"};
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { unit.get(samples_of(indexes({7})), fields); },
                           {"global index 7", "\"responses\""}));
  EXPECT_TRUE(unit.get(samples_of(indexes({})), fields).empty());
  EXPECT_EQ(unit.get(samples_of(indexes({7})), {})[0].size(), 0u);
}

TEST(StorageUnit, EmptyPutsStoreNothing) {
  StorageUnit unit;
  unit.put(samples_of(indexes({})), {});
  unit.put(samples_of(indexes({1, 2})), {});
  Column none;
  none.field = "x";
  none.offsets = {0};
  unit.put(samples_of(indexes({})), {none});
  EXPECT_EQ(unit.stats().samples, 0u);
}

TEST(StorageUnit, BadPutsThrowAndChangeNothing) {
  StorageUnit unit;
  unit.put(samples_of(indexes({1, 2})), {object_column("x", {"one", "two"})});
  const auto before = content_of(unit, indexes({1, 2, 3}), {"x", "y"});
  const StorageStats stats = unit.stats();
  auto unchanged = [&] {
    EXPECT_EQ(content_of(unit, indexes({1, 2, 3}), {"x", "y"}), before);
    EXPECT_EQ(unit.stats().bytes, stats.bytes);
    EXPECT_EQ(unit.stats().samples, stats.samples);
  };
  const Column y = object_column("y", {"a", "b"});
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             unit.put(samples_of(indexes({3, 1, 3})), {object_column("x", {"p", "q", "r"})});
                           },
                           {"global index 3", "twice", "positions 0 and 2"}));
  unchanged();
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             unit.put(samples_of(indexes({-1, 3})), {y});
                           },
                           {"global_indexes[0]", "-1"}));
  unchanged();
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             unit.put(samples_of(indexes({1, 2, 3})), {y});
                           },
                           {"\"y\"", "2 samples", "3 global indexes"}));
  unchanged();
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             unit.put(samples_of(indexes({1, 3})), {y, y});
                           },
                           {"\"y\"", "twice"}));
  unchanged();
  // A good column next to a bad one: neither lands.
  for (const BadColumnCase& c : bad_column_cases()) {
    Column bad = good_column();
    c.spoil(bad);
    EXPECT_TRUE(throws_error(
        ErrorCode::kInvalidArgument,
        [&] {
          unit.put(samples_of(indexes({2, 3})), {y, bad});
        },
        c.fragments))
        << c.name;
    unchanged();
  }
}

// The bookkeeping of a sample with one field, counted against max_bytes.
constexpr uint64_t kOneFieldSample = kSampleOverheadBytes + kValueOverheadBytes;

TEST(StorageUnit, ByteCapacityNamesLimitRequestAndFree) {
  // Room for two one-field samples' bookkeeping and 10 bytes of values.
  const uint64_t limit = 2 * kOneFieldSample + 10;
  StorageUnit unit({.max_bytes = limit});
  unit.put(samples_of(indexes({1, 2})), {object_column("x", {"aaaa", "bb"})});  // 6 bytes used
  EXPECT_EQ(unit.stats().overhead_bytes, 2 * kOneFieldSample);
  const auto before = content_of(unit, indexes({1, 2, 3}), kFieldX);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] { unit.put(samples_of(indexes({3})), {object_column("x", {"12345"})}); },
                           {"storage full", "max_bytes is " + std::to_string(limit),
                            "needs " + std::to_string(kOneFieldSample + 5) + " bytes", "4 are free"}));
  EXPECT_EQ(content_of(unit, indexes({1, 2, 3}), kFieldX), before);
  EXPECT_EQ(unit.stats().bytes, 6u);
  // Overwriting releases what it replaces: 10 - 6 + 4 = 8 bytes are free for index 1.
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] { unit.put(samples_of(indexes({1})), {object_column("x", {"123456789"})}); },
                           {"needs 9 bytes", "8 are free"}));
  unit.put(samples_of(indexes({1})), {object_column("x", {"12345678"})});
  EXPECT_EQ(unit.stats().bytes, 10u);
  unit.clear(indexes({2}));
  unit.put(samples_of(indexes({3})), {object_column("x", {"zz"})});
  EXPECT_EQ(unit.stats().bytes, 10u);
  EXPECT_EQ(unit.stats().overhead_bytes, 2 * kOneFieldSample);
}

// Tiny samples are bounded by their bookkeeping: a unit capped at 4 MiB
// holds about 14,000 one-byte samples, not millions (it once held 2 million
// in 536 MB).
TEST(StorageUnit, MaxBytesBoundsTheBookkeepingOfTinySamples) {
  constexpr uint64_t kLimit = uint64_t{4} << 20;
  StorageUnit unit({.max_bytes = kLimit});
  constexpr int64_t kBatch = 1000;
  int64_t next = 0;
  bool refused = false;
  for (int round = 0; round < 2000 && !refused; ++round) {
    std::vector<int64_t> batch(kBatch);
    for (int64_t& gi : batch) gi = next++;
    try {
      unit.put(samples_of(batch), {object_column("x", std::vector<std::string>(kBatch, "a"))});
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("storage full"), std::string::npos) << error.what();
      refused = true;
    }
  }
  ASSERT_TRUE(refused) << "a unit capped at 4 MiB took " << next << " one-byte samples";
  const StorageStats stats = unit.stats();
  EXPECT_EQ(stats.overhead_bytes, stats.samples * kOneFieldSample);
  EXPECT_LE(stats.bytes + stats.overhead_bytes, kLimit);
  EXPECT_GT(stats.bytes + stats.overhead_bytes, kLimit - kBatch * (kOneFieldSample + 1));
}

TEST(StorageUnit, SampleCapacityCountsNewIndexesOnly) {
  StorageUnit unit({.max_samples = 2});
  unit.put(samples_of(indexes({1})), {object_column("x", {"a"})});
  const auto before = content_of(unit, indexes({1, 2, 3}), kFieldX);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             unit.put(samples_of(indexes({1, 2, 3})), {object_column("x", {"b", "c", "d"})});
                           },
                           {"storage full", "max_samples is 2", "needs 2 new samples", "1 are free"}));
  EXPECT_EQ(content_of(unit, indexes({1, 2, 3}), kFieldX), before);
  EXPECT_EQ(unit.stats().samples, 1u);
  unit.put(samples_of(indexes({1, 2})), {object_column("x", {"b", "c"})});  // one new, one overwrite
  unit.put(samples_of(indexes({2})), {object_column("y", {"more fields are no new sample"})});
  EXPECT_EQ(unit.stats().samples, 2u);
}

class StorageCheckpoint : public ::testing::Test {
 protected:
  // Every dtype, per-sample shapes, scalars, empty values and objects.
  void fill(StorageUnit& unit) {
    std::vector<Column> columns;
    for (DType dtype : kEveryDType) columns.push_back(pattern_column(dtype, 3));
    columns.push_back(object_column("text", {"first", "", "third \x01\x02"}));
    columns.push_back(
        column_of("ids", DType::kInt64, {{2}, {0}, {1, 1}},
                  {bytes_of(std::vector<int64_t>{-1, 2}), {}, bytes_of(std::vector<int64_t>{INT64_MAX})}));
    columns.push_back(column_of(
        "score", DType::kFloat64, {{}},
        {bytes_of(std::vector<double>{0.5}), bytes_of(std::vector<double>{-2}), bytes_of(std::vector<double>{1e300})}));
    unit.put(samples_of(gis_), columns);
    unit.put(samples_of(indexes({1000})), {object_column("text", {"only one field"})});
    fields_.clear();
    for (const Column& column : columns) fields_.push_back(column.field);
    written_ = columns;
  }

  // `unit` holds exactly what fill() wrote.
  void expect_filled(const StorageUnit& unit) {
    const auto rows = unit.get(samples_of(gis_), fields_);
    for (size_t i = 0; i < gis_.size(); ++i) {
      for (size_t f = 0; f < fields_.size(); ++f) {
        SCOPED_TRACE(fields_[f]);
        expect_same_value(rows[i][f], written_[f], i);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(rows[i][f].bytes().data()) % 64, 0u);
      }
    }
    const std::vector<std::string> text = {"text"};
    EXPECT_EQ(text_of(unit.get(samples_of(indexes({1000})), text)[0][0]), "only one field");
    EXPECT_EQ(unit.stats().samples, 4u);
  }

  // A checkpoint of fill()'s content.
  std::string save_filled() {
    StorageUnit source;
    fill(source);
    const std::string path = dir_.file("full.ckpt");
    source.save(path);
    return path;
  }

  std::vector<char> read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  // `bytes` in a new file, replacing the previous variant. A new name each
  // time: ext4 syncs a file truncated and rewritten in place, which makes
  // thousands of variants take seconds.
  std::string write_variant(const std::vector<char>& bytes) {
    if (!variant_.empty()) std::filesystem::remove(variant_);
    variant_ = dir_.file("variant-" + std::to_string(++variants_) + ".ckpt");
    std::ofstream out(variant_, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return variant_;
  }

  // A unit holding one small value, to show that failed loads keep it.
  static StorageUnit& keep(StorageUnit& unit) {
    unit.put(samples_of(indexes({42})), {object_column("x", {"keep me"})});
    return unit;
  }
  static void expect_kept(const StorageUnit& unit) {
    EXPECT_EQ(text_of(unit.get(samples_of(indexes({42})), kFieldX)[0][0]), "keep me");
    EXPECT_EQ(unit.stats().samples, 1u);
    EXPECT_EQ(unit.stats().bytes, 7u);
  }

  TempDir dir_;
  std::string variant_;
  int variants_ = 0;
  const std::vector<int64_t> gis_ = {0, 17, 3};
  std::vector<std::string> fields_;
  std::vector<Column> written_;
};

// Unit 0 of 2 under a placement of the test's own: blocks of 16 global indexes in turn.
bool on_unit_0_of_2(int64_t global_index) { return global_index / 16 % 2 == 0; }

// A part saved in blocks holds only its unit's samples: one of another unit
// means it was saved by another number of units.
TEST_F(StorageCheckpoint, APartHoldingAnotherUnitsSampleIsRefused) {
  const std::string path = save_filled();  // global indexes 0, 3, 17 (unit 1 of 2) and 1000
  StorageUnit unit;
  keep(unit);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] { unit.load_part(path, std::span(&path, 1), on_unit_0_of_2); },
                           {"holds global index 17", "another number of units"}));
  expect_kept(unit);
  unit.load_part(path, std::span(&path, 1), [](int64_t) { return true; });  // the only unit
  expect_filled(unit);
}

// A part saved before blocks (format version 3) held gi % N: the unit picks
// its samples out of every part.
TEST_F(StorageCheckpoint, PartsSavedBeforeBlocksArePickedOverForTheUnitsSamples) {
  // The file at `path` as version 3 wrote it: the same bytes, another version and checksum.
  const auto as_version_3 = [&](const std::string& path) {
    std::vector<char> bytes = read(path);
    bytes[8] = 3;
    durable::Checksum checksum;
    checksum.update(std::as_bytes(std::span(bytes.data(), bytes.size() - durable::kFrameTrailerSize)));
    const uint64_t sum = checksum.value();
    std::memcpy(bytes.data() + bytes.size() - durable::kFrameTrailerSize, &sum, sizeof sum);
    const std::string out = path + ".v3";
    std::ofstream(out, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return out;
  };
  StorageUnit other_source;
  other_source.put(samples_of(indexes({5, 20})), {object_column("text", {"five", "twenty"})});
  other_source.save(dir_.file("other.ckpt"));
  const std::vector<std::string> parts = {as_version_3(save_filled()), as_version_3(dir_.file("other.ckpt"))};
  StorageUnit unit;
  unit.load_part(parts[0], parts, on_unit_0_of_2);
  const std::vector<std::string> text = {"text"};
  EXPECT_EQ(text_of(unit.get(samples_of(indexes({5})), text)[0][0]), "five");
  EXPECT_EQ(text_of(unit.get(samples_of(indexes({1000})), text)[0][0]), "only one field");
  EXPECT_EQ(unit.stats().samples, 4u) << "0, 3, 1000 and 5; not 17 nor 20";
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample, [&] { unit.get(samples_of(indexes({17})), text); }, {"17"}));
}

TEST_F(StorageCheckpoint, RoundTripKeepsEveryValue) {
  StorageUnit source;
  fill(source);
  const std::string path = dir_.file("storage.ckpt");
  source.save(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  StorageUnit loaded;
  keep(loaded);
  loaded.load(path);
  expect_filled(loaded);
  EXPECT_EQ(loaded.stats().bytes, source.stats().bytes);
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample, [&] { loaded.get(samples_of(indexes({42})), kFieldX); },
                           {"42"}));  // load replaces, it does not merge

  // Same content, same bytes on disk.
  const std::string again = dir_.file("again.ckpt");
  loaded.save(again);
  EXPECT_EQ(read(again), read(path));
}

TEST_F(StorageCheckpoint, EmptyUnitRoundTrips) {
  StorageUnit empty;
  const std::string path = dir_.file("empty.ckpt");
  empty.save(path);
  StorageUnit loaded;
  keep(loaded);
  loaded.load(path);
  EXPECT_EQ(loaded.stats().samples, 0u);
  EXPECT_EQ(loaded.stats().bytes, 0u);
}

TEST_F(StorageCheckpoint, MissingFileIsNotFoundAndChangesNothing) {
  StorageUnit unit;
  keep(unit);
  const std::string path = dir_.file("nothing-here.ckpt");
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { unit.load(path); }, {path, "does not exist"}));
  expect_kept(unit);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.load(dir_.file("")); }, {"not a regular file"}));
  expect_kept(unit);
}

TEST_F(StorageCheckpoint, EveryTruncationIsRejected) {
  const std::vector<char> bytes = read(save_filled());
  StorageUnit unit;
  keep(unit);
  for (size_t size = 0; size < bytes.size(); ++size) {
    const std::string cut = write_variant({bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size)});
    ASSERT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.load(cut); }, {cut}))
        << "cut at " << size << " of " << bytes.size();
  }
  expect_kept(unit);
  const std::string cut = write_variant({bytes.begin(), bytes.end() - 20});
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.load(cut); }, {"truncated", "of record 39"}));
}

TEST_F(StorageCheckpoint, EveryFlippedByteIsRejected) {
  const std::vector<char> bytes = read(save_filled());
  StorageUnit unit;
  keep(unit);
  for (size_t at = 0; at < bytes.size(); ++at) {
    std::vector<char> corrupt = bytes;
    corrupt[at] = static_cast<char>(corrupt[at] ^ 0x10);
    const std::string bad = write_variant(corrupt);
    ASSERT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.load(bad); }, {bad}))
        << "flipped byte " << at << " of " << bytes.size();
  }
  expect_kept(unit);
}

TEST_F(StorageCheckpoint, CorruptionMessagesSayWhat) {
  const std::vector<char> bytes = read(save_filled());
  StorageUnit unit;
  keep(unit);
  auto load_with = [&](size_t at, char value) {
    std::vector<char> corrupt = bytes;
    corrupt[at] = value;
    return [&unit, path = write_variant(corrupt)] { unit.load(path); };
  };
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, load_with(0, 'X'), {"bad magic"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, load_with(8, 5), {"version 5"}));
  // Record 0's dtype byte: header (24) + global index, nbytes, field size, rank (24).
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, load_with(24 + 24, 77), {"record 0", "unknown dtype code 77"}));
  // The last payload byte: structure intact, only the checksum notices.
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, load_with(bytes.size() - 9, 'Z'), {"checksum mismatch"}));
  std::vector<char> longer = bytes;
  longer.insert(longer.end() - 8, 'j');
  const std::string bad = write_variant(longer);
  EXPECT_TRUE(
      throws_error(ErrorCode::kInvalidArgument, [&] { unit.load(bad); }, {"1 unexpected bytes after the last record"}));
  const std::string other = write_variant({'n', 'o', 't', ' ', 'o', 'u', 'r', 's'});
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.load(other); }, {"bad magic"}));
  expect_kept(unit);
}

TEST_F(StorageCheckpoint, LoadOverCapacityChangesNothing) {
  const std::string path = save_filled();
  StorageUnit small({.max_samples = 3});
  keep(small);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { small.load(path); },
                           {"max_samples is 3", path, "needs 4 samples"}));
  expect_kept(small);
  const std::string limit = std::to_string(2 * kOneFieldSample);  // room for two of its four samples
  StorageUnit tiny({.max_bytes = 2 * kOneFieldSample});
  keep(tiny);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { tiny.load(path); },
                           {"max_bytes is " + limit, limit + " are free"}));
  EXPECT_EQ(tiny.stats().samples, 1u);
}

TEST_F(StorageCheckpoint, SaveIntoAMissingDirectoryThrowsAndLeavesNoFile) {
  StorageUnit unit;
  keep(unit);
  const std::string path = dir_.file("no/such/dir/storage.ckpt");
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.save(path); }, {path}));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_F(StorageCheckpoint, SaveReplacesAnOldCheckpointWhole) {
  StorageUnit unit;
  keep(unit);
  const std::string path = dir_.file("storage.ckpt");
  unit.save(path);
  StorageUnit bigger;
  fill(bigger);
  bigger.save(path);
  StorageUnit loaded;
  loaded.load(path);
  expect_filled(loaded);
}

}  // namespace
}  // namespace seqflow::test
