// Remote placement in blocks and the put in segments it allows: sample gi on
// unit (gi / kPlacementBlock) % N, a unit's runs of consecutive samples sent
// as frames of their own (pointing into the columns: no copy), short runs
// packed together, and a unit's reading of the segments, which refuses
// segments that do not add up or name other columns.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "seqflow/error.h"
#include "storage_test_support.h"
#include "transport/storage_routing.h"
#include "transport/wire_codec.h"
#include "wire_test_support.h"

namespace seqflow::transport {
namespace {

using test::int64_column;
using test::int64_of;

constexpr size_t kBlock = kPlacementBlock;

// `samples` rows of `width` int64 values; row i holds i * 1000 + j.
Column rows_column(const std::string& field, size_t samples, size_t width) {
  std::vector<int64_t> values(samples * width);
  for (size_t i = 0; i < samples; ++i) {
    for (size_t j = 0; j < width; ++j) values[i * width + j] = static_cast<int64_t>(i * 1000 + j);
  }
  Column column;
  column.field = field;
  column.dtype = DType::kInt64;
  column.shapes = {{static_cast<int64_t>(width)}};
  for (size_t i = 0; i <= samples; ++i) column.offsets.push_back(i * width * sizeof(int64_t));
  column.buffer = Buffer::copy_of(std::as_bytes(std::span<const int64_t>(values)));
  return column;
}

bool points_into(const zmq::message_t& frame, const Column& column) {
  const auto* data = static_cast<const std::byte*>(frame.data());
  return data >= column.buffer->data && data < column.buffer->data + column.buffer->size;
}

// The segments' samples in order, each as the first value of its row.
std::vector<int64_t> first_values(const std::vector<std::vector<Column>>& segments, size_t column) {
  std::vector<int64_t> out;
  for (const auto& segment : segments) {
    for (size_t i = 0; i < segment[column].sample_count(); ++i) out.push_back(int64_of(segment[column].sample(i)));
  }
  return out;
}

TEST(PlacementInBlocks, ConsecutiveIndexesFillABlockOnEachUnitInTurn) {
  for (const size_t units : {1, 2, 3}) {
    for (int64_t gi = 0; gi < static_cast<int64_t>(4 * kBlock * units); ++gi) {
      EXPECT_EQ(unit_of(gi, units), static_cast<size_t>(gi) / kBlock % units) << gi;
    }
  }
  std::vector<int64_t> indexes(4 * kBlock);
  std::iota(indexes.begin(), indexes.end(), 0);
  const std::vector<Shard> shards = shard_indexes(indexes, 2);
  std::vector<size_t> unit_0(2 * kBlock);  // blocks 0 and 2
  std::iota(unit_0.begin(), unit_0.begin() + kBlock, 0);
  std::iota(unit_0.begin() + kBlock, unit_0.end(), 2 * kBlock);
  EXPECT_EQ(shards[0].positions, unit_0);
  EXPECT_EQ(shards[1].positions.front(), kBlock);
  EXPECT_EQ(shards[1].global_indexes.size(), 2 * kBlock);
}

TEST(PlacementInBlocks, RunsOfConsecutivePositions) {
  const std::vector<size_t> positions = {0, 1, 2, 5, 6, 9};
  const std::vector<std::pair<size_t, size_t>> runs = {{0, 3}, {3, 5}, {5, 6}};
  EXPECT_EQ(consecutive_runs(positions), runs);
  EXPECT_TRUE(consecutive_runs({}).empty());
}

// Unit 0's shard of a put of 4 blocks to 2 units: its 2 blocks, as frames of
// their own (a block of 4 KiB rows is 64 KiB or more per column), read back intact.
TEST(PutSegments, ARunOfLargeRowsIsASegmentWhoseFramesPointIntoTheColumns) {
  const std::vector<Column> columns = {rows_column("a", 4 * kBlock, 512), rows_column("b", 4 * kBlock, 512)};
  std::vector<int64_t> indexes(4 * kBlock);
  std::iota(indexes.begin(), indexes.end(), 0);
  const std::vector<size_t> positions = shard_indexes(indexes, 2)[0].positions;
  Frames frames(1);
  const wire::ColumnSegments segments = wire::append_column_segments(columns, positions, frames);
  EXPECT_EQ(segments.samples, (std::vector<uint64_t>{kBlock, kBlock}));
  ASSERT_EQ(frames.size(), 1 + 2 * columns.size());
  for (size_t f = 1; f < frames.size(); ++f) {
    EXPECT_TRUE(points_into(frames[f], columns[(f - 1) % columns.size()])) << "frame " << f << " is no copy";
  }
  const auto taken = wire::take_column_segments(segments.entries, frames, 1, segments.samples, positions.size(), "put");
  ASSERT_EQ(taken.size(), 2u);
  for (size_t c = 0; c < columns.size(); ++c) {
    std::vector<int64_t> expected;
    for (const size_t p : positions) expected.push_back(static_cast<int64_t>(p * 1000));
    EXPECT_EQ(first_values(taken, c), expected);
    EXPECT_EQ(taken[1][c].field, columns[c].field);
  }
}

// Short runs between long ones are packed together into one segment; a put
// of short runs only is one packed segment, as before blocks.
TEST(PutSegments, ShortRunsArePackedTogetherBetweenLongOnes) {
  const size_t long_run = wire::kMinRunFrameBytes / sizeof(int64_t);
  const Column column = int64_column("x", std::vector<int64_t>(3 * long_run));
  std::vector<size_t> positions(long_run);
  std::iota(positions.begin(), positions.end(), 0);
  for (const size_t p : {long_run + 1, long_run + 3, long_run + 5}) positions.push_back(p);
  for (size_t p = 2 * long_run; p < 3 * long_run; ++p) positions.push_back(p);
  Frames frames(1);
  const wire::ColumnSegments segments = wire::append_column_segments({column}, positions, frames);
  EXPECT_EQ(segments.samples, (std::vector<uint64_t>{long_run, 3, long_run}));
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_TRUE(points_into(frames[1], column));
  EXPECT_FALSE(points_into(frames[2], column)) << "three runs of one sample: a packed copy";
  EXPECT_TRUE(points_into(frames[3], column));

  Frames short_only(1);
  const std::vector<size_t> alternate = {0, 2, 4, 6};
  const wire::ColumnSegments packed = wire::append_column_segments({column}, alternate, short_only);
  EXPECT_TRUE(packed.samples.empty()) << "one segment: its count is the put's";
  EXPECT_EQ(short_only.size(), 2u);
}

// The entries and frames of a put whose segments hold `per_segment[k]` of
// the column's samples in turn (each segment's column named `fields[k]`).
std::string segment_entries(const std::vector<size_t>& per_segment, const std::vector<std::string>& fields,
                            Frames& frames) {
  std::string entries(1, static_cast<char>(0x90 | per_segment.size()));  // a msgpack fixarray
  size_t first = 0;
  for (size_t k = 0; k < per_segment.size(); ++k) {
    std::vector<size_t> positions(per_segment[k]);
    std::iota(positions.begin(), positions.end(), first);
    first += per_segment[k];
    const Column column = int64_column(fields[k], {10, 11, 12, 13});
    entries += array_elements(wire::append_columns({column}, positions, frames), wire::kValueDepth)->at(0);
  }
  return entries;
}

TEST(PutSegments, SegmentsThatDoNotAddUpOrNameOtherColumnsAreRefused) {
  const auto take = [](const std::vector<size_t>& per_segment, const std::vector<std::string>& fields,
                       std::vector<uint64_t> segment_samples, size_t samples) {
    Frames frames(1);
    const std::string entries = segment_entries(per_segment, fields, frames);
    return [entries, frames = std::make_shared<Frames>(std::move(frames)), segment_samples, samples] {
      wire::take_column_segments(entries, *frames, 1, segment_samples, samples, "put request");
    };
  };
  // Sound: two segments of 1 and 3 samples.
  Frames frames(1);
  const std::string entries = segment_entries({1, 3}, {"x", "x"}, frames);
  const std::vector<uint64_t> counts = {1, 3};
  const auto segments = wire::take_column_segments(entries, frames, 1, counts, 4, "put request");
  EXPECT_EQ(first_values(segments, 0), (std::vector<int64_t>{10, 11, 12, 13}));

  EXPECT_TRUE(test::throws_error(ErrorCode::kInvalidArgument, take({1, 3}, {"x", "x"}, {1, 2}, 4),
                                 {"segment_samples", "add up to its 4 samples"}));
  EXPECT_TRUE(test::throws_error(ErrorCode::kInvalidArgument, take({1, 3}, {"x", "x"}, {4, 0}, 4),
                                 {"segment_samples", "positive"}));
  EXPECT_TRUE(test::throws_error(ErrorCode::kInvalidArgument, take({1, 3}, {"x", "x"}, {1, 1, 2}, 4),
                                 {"2 columns for 3 segments"}));
  EXPECT_TRUE(test::throws_error(ErrorCode::kInvalidArgument, take({1, 3}, {"x", "y"}, {1, 3}, 4),
                                 {"segment 1 column 0 is field \"y\"", "segment 0's is \"x\""}));
  EXPECT_TRUE(
      test::throws_error(ErrorCode::kInvalidArgument, take({1, 3}, {"x", "x"}, {3, 1}, 4), {"column 0", "offsets"}));
}

}  // namespace
}  // namespace seqflow::transport
