// The wire codec: every message kind survives a trip through a real header
// frame, columns and stored views travel without copies where the bytes lie
// back to back, and malformed input of any kind is a kInvalidArgument error
// naming the problem, never a crash.
#include "transport/wire_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "controller_test_support.h"
#include "storage_test_support.h"
#include "transport/schema_codec.h"
#include "wire_test_support.h"

namespace seqflow::test {
namespace {

using transport::Frames;
namespace wire = transport::wire;

BatchMeta sample_batch_meta() {
  BatchMeta meta;
  meta.global_indexes = {7, 3, 12, 40, 5};
  meta.generations = {1, 99, uint64_t{1} << 62, 5, UINT64_MAX};
  meta.partition_ids.append(2, "train@step_1");
  meta.partition_ids.append(1, "val");
  meta.partition_ids.append(2, "train@step_1");  // a name may come back in a later run
  meta.field_schema["prompt"] = FieldSchema{DType::kInt64, {-1}, true, false};
  meta.field_schema["reward"] = FieldSchema{DType::kFloat32, {1}, false, false};
  meta.field_schema["text"] = FieldSchema{DType::kUInt8, {}, false, true};
  meta.production_status = {1, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1};
  meta.custom_meta.push_back({{"total_lengths", 1834}, {"group_id", "g1"}});
  meta.custom_meta.push_back(Value::object());
  meta.custom_meta.push_back({{"total_lengths", 9}, {"tags", Value::array({"a", "b"})}, {"score", 0.25}});
  meta.custom_meta.push_back({{"nested", {{"k", Value::array({1, 2, 3})}}}});
  meta.custom_meta.push_back(Value::object());
  meta.extra_info = {{"step", 12}, {"note", "from rollout"}, {"weights", Value::array({0.5, 1.5})}};
  return meta;
}

TEST(WireCodecBatchMeta, ABatchMetaWithoutGenerationsStaysWithout) {
  BatchMeta meta = sample_batch_meta();
  meta.generations.clear();  // built by hand: not known
  expect_same_batch_meta(decode_batch_meta(encode_batch_meta(meta), "reply"), meta);
  Tree encoded = encode_batch_meta(meta);
  encoded.erase("generations");  // a peer may leave them out
  EXPECT_TRUE(decode_batch_meta(encoded, "reply").generations.empty());
}

TEST(WireCodecSampleKeys, StorageRequestsCarryPartitionsAndGenerations) {
  const std::vector<int64_t> indexes = {4, 9, 2, 7};
  const PartitionIdList partitions(std::vector<std::string>{"a", "a", "b", "a"});
  const std::vector<uint64_t> generations = {10, 11, 12, 13};
  MsgpackMapWriter header;
  const size_t positions[] = {3, 1, 2};  // one unit's share, in its order
  wire::add_sample_keys(header, {indexes, partitions, generations}, positions);
  const Tree got_json = tree_of(header);
  const wire::SampleKeyColumns got = wire::read_sample_keys(
      TreeHeader(got_json, "get request", {"indexes", "partitions", "partition_ends", "generations"}));
  EXPECT_EQ(got.global_indexes, (std::vector<int64_t>{7, 9, 2}));
  EXPECT_EQ(got.partitions, PartitionIdList(std::vector<std::string>{"a", "a", "b"}));
  EXPECT_EQ(got.generations, (std::vector<uint64_t>{13, 11, 12}));

  MsgpackMapWriter unknown;  // a hand-built BatchMeta's get: no generations
  wire::add_sample_keys(unknown, {indexes, partitions, {}}, positions);
  const Tree unknown_json = tree_of(unknown);
  EXPECT_TRUE(wire::read_sample_keys(
                  TreeHeader(unknown_json, "get request", {"indexes", "partitions", "partition_ends", "generations"}))
                  .generations.empty());
  Tree short_generations = got_json;
  short_generations["generations"] = Tree::numbers(std::span<const uint64_t>(generations).first(2));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             wire::read_sample_keys(
                                 TreeHeader(short_generations, "get request",
                                            {"indexes", "partitions", "partition_ends", "generations"}));
                           },
                           {"get request field 'generations'", "one generation per sample"}));
}

TEST(WireCodecSampleKeys, VersionsTravelOnlyWhenSetAndOnlyForTheUnitsSamples) {
  const std::vector<int64_t> indexes = {4, 9, 2, 7};
  const PartitionIdList partitions(4, "p");
  const std::vector<uint64_t> generations = {1, 1, 1, 1};
  const FieldVersions read = {{"x", {10, 11, 12, 13}}, {"y", {0, 5, 0, 6}}};
  const size_t positions[] = {3, 1};  // one unit's share, in its order
  const auto keys_through_wire = [&](const SampleKeys& keys) {
    MsgpackMapWriter header;
    wire::add_sample_keys(header, keys, positions);
    return tree_of(header);
  };
  const auto read_keys = [](const Tree& header) {
    return wire::read_sample_keys(
        TreeHeader(header, "get request",
                   {"indexes", "partitions", "partition_ends", "generations", "write_version", "read_versions"}));
  };

  const Tree plain = keys_through_wire({indexes, partitions, generations});
  EXPECT_FALSE(plain.contains("write_version"));
  EXPECT_FALSE(plain.contains("read_versions"));
  const wire::SampleKeyColumns unversioned = read_keys(plain);
  EXPECT_EQ(unversioned.write_version, 0u);
  EXPECT_EQ(unversioned.keys().read_versions, nullptr);

  const FieldVersions none;
  const Tree versioned = keys_through_wire({indexes, partitions, generations, 9, &read});
  const wire::SampleKeyColumns got = read_keys(versioned);
  EXPECT_EQ(got.write_version, 9u);
  EXPECT_EQ(got.read_versions, (FieldVersions{{"x", {13, 11}}, {"y", {6, 5}}}));
  EXPECT_EQ(got.keys().read_versions, &got.read_versions);
  EXPECT_EQ(got.keys().write_version, 9u);
  EXPECT_FALSE(keys_through_wire({indexes, partitions, generations, 0, &none}).contains("read_versions"));

  const FieldVersions short_y = {{"y", {1, 2}}};
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             keys_through_wire({indexes, partitions, generations, 0, &short_y});
                           },
                           {"read_versions", "\"y\"", "2 versions for 4 global indexes"}));
  Tree long_x = versioned;
  long_x["read_versions"]["x"] = Tree::numbers(std::span<const uint64_t>(read.at("x")));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { read_keys(long_x); },
                           {"get request field 'read_versions'", "'x'", "32 bytes", "2 samples"}));
  Tree half = versioned;
  half["read_versions"]["x"] = Tree::binary(std::vector<uint8_t>(12));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { read_keys(half); }, {"'read_versions'", "12 bytes"}));
  Tree text_version = versioned;
  text_version["write_version"] = "9";
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { read_keys(text_version); },
                           {"get request field 'write_version'", "unsigned integer"}));
}

TEST(WireCodecBatchMeta, RoundTripKeepsPartitionsSchemaProductionCustomMetaAndExtraInfo) {
  const BatchMeta meta = sample_batch_meta();
  const Tree encoded = encode_batch_meta(meta);
  // The partition names travel once per run, not once per sample.
  EXPECT_EQ(encoded.at("partitions").size(), meta.partition_ids.run_count());
  expect_same_batch_meta(decode_batch_meta(encoded, "reply"), meta);
}

TEST(WireCodecBatchMeta, EmptyBatchRoundTrips) {
  BatchMeta empty;
  const BatchMeta got = decode_batch_meta(encode_batch_meta(empty), "reply");
  EXPECT_EQ(got.size(), 0u);
  EXPECT_TRUE(got.partition_ids.empty());
  EXPECT_TRUE(got.custom_meta.empty());
  EXPECT_TRUE(got.extra_info.is_object());
}

std::vector<PartitionKeys> sample_listing() {
  auto tag = [](const Tree& object) {
    const std::string bytes = object.bytes();
    return std::vector<uint8_t>(bytes.begin(), bytes.end());
  };
  std::vector<PartitionKeys> listed;
  PartitionKeys& train = listed.emplace_back("train");
  auto push = [](PartitionKeys& partition, std::string_view key, const std::vector<uint8_t>& encoded) {
    partition.push_back(key, std::string_view(reinterpret_cast<const char*>(encoded.data()), encoded.size()));
  };
  push(train, "uid-1", tag({{"status", "running"}, {"global_steps", 3}}));
  push(train, "", {});  // keys are bytes to the codec; "" is kept, as is a tag of {}
  push(train, "uid-\xc3\xa9", tag({{"uid", "g"}, {"nested", {{"k", Tree::array({1, 2})}}}}));
  train.set_version(ListingVersion{0xfedcba9876543210u, 7});
  listed.emplace_back("no keys");
  push(listed.emplace_back("val"), "v", tag({{"score", 0.5}}));
  return listed;
}

void expect_same_listing(const std::vector<PartitionKeys>& got, const std::vector<PartitionKeys>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t p = 0; p < got.size(); ++p) {
    SCOPED_TRACE(expected[p].partition_id());
    EXPECT_EQ(keys_of(got[p]), keys_of(expected[p]));
    for (size_t i = 0; i < got[p].size() && i < expected[p].size(); ++i) EXPECT_EQ(got[p].tag(i), expected[p].tag(i));
    EXPECT_EQ(got[p], expected[p]);
  }
}

TEST(WireCodecKvList, RoundTripKeepsPartitionOrderKeysAndEncodedTags) {
  const std::vector<PartitionKeys> listed = sample_listing();
  expect_same_listing(decode_kv_list(encode_kv_list(listed), "kv_list reply"), listed);
  Frames frames;
  frames.push_back(wire::kv_list_frame(listed));
  expect_same_listing(wire::read_kv_list(frames, 0, "kv_list reply"), listed);
  EXPECT_TRUE(decode_kv_list(encode_kv_list({}), "kv_list reply").empty());
}

TEST(WireCodecKvList, UnchangedListingsTravelAsVersionsOnly) {
  std::vector<PartitionKeys> listed = sample_listing();
  listed.insert(listed.begin() + 1, PartitionKeys::unchanged("held", ListingVersion{42, 3}));
  const auto got = decode_kv_list(encode_kv_list(listed), "kv_list reply");
  expect_same_listing(got, listed);
  EXPECT_TRUE(got[1].is_unchanged());
  EXPECT_EQ(got[1].version(), (ListingVersion{42, 3}));
  EXPECT_FALSE(got[0].is_unchanged());
  EXPECT_EQ(got[0].version(), (ListingVersion{0xfedcba9876543210u, 7}));

  const std::map<std::string, ListingVersion> known = {{"held", {42, 3}}, {"other", {1, 0}}};
  const std::string p = "p";
  const Tree request = tree_of(wire::kv_list_request(&p, known));
  const Tree received = request;
  const TreeHeader header(received, "kv_list request", {"partition_id", "known_partitions", "known_versions"});
  EXPECT_EQ(wire::read_known_listings(header), known);
  EXPECT_TRUE(wire::kv_list_request(nullptr, {}).empty());
  Tree short_versions = request;
  short_versions["known_versions"] = Tree::numbers(std::span<const uint64_t>(std::vector<uint64_t>{42, 3, 1}));
  const Tree spoiled = short_versions;
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             wire::read_known_listings(TreeHeader(
                                 spoiled, "kv_list request", {"partition_id", "known_partitions", "known_versions"}));
                           },
                           {"'known_versions'", "an epoch and a count per known partition"}));
}

TEST(WireCodecMetaRequest, RoundTripInEveryMode) {
  for (MetaMode mode : {MetaMode::kInsert, MetaMode::kFetch, MetaMode::kForceFetch}) {
    MetaRequest request;
    request.fields = {"input_ids", "responses"};
    request.batch_size = 256;
    request.partition_id = "train@global_step_12";
    request.mode = mode;
    request.task_name = "log_prob";
    request.sampling.dp_rank = 3;
    request.sampling.batch_index = 17;
    request.polling = mode == MetaMode::kFetch;
    request.timeout = std::chrono::milliseconds(1234);
    const MetaRequest got = decode_meta_request(encode_meta_request(request), "request");
    expect_same_meta_request(got, request);
  }
}

TEST(WireCodecMetaRequest, SamplingConfigKeysAndDpRankGivenRoundTrip) {
  MetaRequest request;
  request.fields = {"x"};
  request.batch_size = 4;
  request.partition_id = "p";
  request.task_name = "t";
  request.sampling.dp_rank = 2;
  request.sampling.dp_rank_given = true;
  request.sampling.extra = {{"temperature", 0.7}, {"policy_version", 12}, {"tags", Value::array({"a", nullptr, true})}};
  const Tree encoded = encode_meta_request(request);
  expect_same_meta_request(decode_meta_request(encoded, "request"), request);
  const Frames frames = wire::header_message(wire::meta_request_frame(request));
  expect_same_meta_request(wire::read_meta_request(frames, 0, "request"), request);
  // No other keys: the message carries none.
  request.sampling.extra = nullptr;
  request.sampling.dp_rank_given = false;
  const Tree plain = encode_meta_request(request);
  EXPECT_FALSE(plain.contains("sampling_extra"));
  expect_same_meta_request(decode_meta_request(plain, "request"), request);
  // A lease travels as lease_ms, absent without one.
  EXPECT_FALSE(plain.contains("lease_ms"));
  request.lease = std::chrono::milliseconds(2500);
  const Tree leased = encode_meta_request(request);
  EXPECT_TRUE(leased.contains("lease_ms"));
  expect_same_meta_request(decode_meta_request(leased, "request"), request);
}

TEST(WireCodecMetaRequest, SamplingExtraThatIsNotAMapIsRefused) {
  MetaRequest request;
  request.sampling.extra = {{"k", 1}};
  Tree encoded = encode_meta_request(request);
  encoded["sampling_extra"] = Tree::array({1, 2});
  EXPECT_TRUE(throws_invalid([&] { decode_meta_request(encoded, "get_meta request"); },
                             {"get_meta request field 'sampling_extra' must be a map"}));
  encoded.erase("dp_rank_given");
  EXPECT_TRUE(
      throws_invalid([&] { decode_meta_request(encoded, "get_meta request"); }, {"lacks the field 'dp_rank_given'"}));
}

TEST(WireCodecSchemas, RoundTripOfFixedNestedAndObjectFields) {
  const std::map<std::string, FieldSchema> schemas = {
      {"fixed", FieldSchema{DType::kBFloat16, {2, 3}, false, false}},
      {"nested", FieldSchema{DType::kInt32, {-1, 4}, true, false}},
      {"object", FieldSchema{DType::kUInt8, {}, false, true}},
      {"scalar", FieldSchema{DType::kFloat64, {}, false, false}},
  };
  MsgpackWriter encoded;
  wire::write_schemas(encoded, schemas, wire::SchemaKeys::kShapeSecond);
  EXPECT_EQ(wire::read_schemas(encoded.bytes(), 0, "m"), schemas);
  MsgpackWriter sorted;
  wire::write_schemas(sorted, schemas, wire::SchemaKeys::kSorted);
  EXPECT_EQ(wire::read_schemas(sorted.bytes(), 0, "m"), schemas);
  EXPECT_EQ(sorted.bytes(), Tree::read(encoded.bytes()).bytes()) << "the sorted keys are those of a tree";
}

TEST(WireCodecStatus, RoundTripKeepsIndexOrderAndFlags) {
  const std::vector<std::pair<int64_t, bool>> status = {{0, true}, {9, false}, {4, true}, {1LL << 40, false}};
  EXPECT_EQ(decode_status(encode_status(status), "reply"), status);
  EXPECT_TRUE(decode_status(encode_status({}), "reply").empty());
}

// Samples of `floats` float32 values each, sample i filled with i + 0.5.
Column float_samples(const std::string& field, const std::vector<size_t>& floats) {
  std::vector<Shape> shapes;
  std::vector<Bytes> samples;
  for (size_t i = 0; i < floats.size(); ++i) {
    shapes.push_back({static_cast<int64_t>(floats[i])});
    samples.push_back(bytes_of(std::vector<float>(floats[i], static_cast<float>(i) + 0.5f)));
  }
  const bool fixed = std::all_of(floats.begin(), floats.end(), [&](size_t n) { return n == floats[0]; });
  if (fixed) shapes.resize(1);
  return column_of(field, DType::kFloat32, shapes, samples);
}

// Sample `position` of `column` must equal sample i of `got`.
void expect_same_sample(const Column& got, size_t i, const Column& column, size_t position) {
  const SampleView want = column.sample(position);
  const SampleView have = got.sample(i);
  EXPECT_EQ(have.shape, want.shape) << got.field << " sample " << i;
  EXPECT_EQ(have.dtype, want.dtype);
  EXPECT_EQ(have.is_object, want.is_object);
  EXPECT_EQ(to_bytes(have.bytes()), to_bytes(want.bytes())) << got.field << " sample " << i;
}

// The put path: append_columns into a request, then take_columns from its frames.
std::vector<Column> send_columns(const std::vector<Column>& columns, std::span<const size_t> positions,
                                 std::vector<const void*>& frame_data) {
  Frames frames(1);
  MsgpackMapWriter header;
  header.set("columns").encoded(wire::append_columns(columns, positions, frames));
  frames[0] = wire::header_frame(header);
  frame_data.clear();
  for (size_t f = 1; f < frames.size(); ++f) frame_data.push_back(frames[f].data());
  const size_t samples = positions.empty() ? columns.front().sample_count() : positions.size();
  const EncodedMap received = wire::read_header(frames, 0, "put request", {"columns"});
  return wire::take_columns(received.value("columns"), frames, 1, samples, "put request");
}

bool points_into(const void* data, const Buffer& buffer) {
  const auto* p = static_cast<const std::byte*>(data);
  return p >= buffer.data && p < buffer.data + buffer.size;
}

TEST(WireCodecColumns, AllSamplesTravelAsOneFramePerColumnPointingIntoItsBuffer) {
  const std::vector<Column> columns = {float_samples("fixed", {3000, 3000, 3000, 3000}),
                                       float_samples("nested", {5000, 2600, 1, 7000}),
                                       object_column("text", {"ab", "", "cde", "f"})};
  std::vector<const void*> frame_data;
  const std::vector<Column> got = send_columns(columns, {}, frame_data);
  ASSERT_EQ(got.size(), columns.size());
  ASSERT_EQ(frame_data.size(), columns.size());
  for (size_t c = 0; c < columns.size(); ++c) {
    EXPECT_EQ(got[c].field, columns[c].field);
    EXPECT_EQ(got[c].shapes.size(), columns[c].shapes.size()) << "a fixed shape travels once";
    ASSERT_EQ(got[c].sample_count(), columns[c].sample_count());
    for (size_t i = 0; i < columns[c].sample_count(); ++i) expect_same_sample(got[c], i, columns[c], i);
  }
  // Received: a column owns its frame's bytes, no copy (a frame under
  // transport::kReceiveBatchBytes is copied: WireCodecColumns.SmallFramesAreCopiedWhenReceived).
  for (size_t c : {0, 1}) EXPECT_EQ(static_cast<const void*>(got[c].buffer->data), frame_data[c]) << c;
  // Sent: large columns point into the caller's buffer; a column below
  // transport::kZeroCopyMinBytes is copied.
  EXPECT_EQ(frame_data[0], columns[0].buffer->data);
  EXPECT_EQ(frame_data[1], columns[1].buffer->data);
  EXPECT_FALSE(points_into(frame_data[2], *columns[2].buffer));
}

TEST(WireCodecColumns, ContiguousSubsetIsAZeroCopyFrameIntoTheColumnBuffer) {
  const Column column = float_samples("nested", {100, 300, 400, 500, 50, 80});
  const std::vector<size_t> positions = {1, 2, 3};
  std::vector<const void*> frame_data;
  const std::vector<Column> got = send_columns({column}, positions, frame_data);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(frame_data[0], column.buffer->data + column.offsets[1]);
  EXPECT_EQ(got[0].buffer->size, column.offsets[4] - column.offsets[1]);
  EXPECT_EQ(got[0].offsets.front(), 0u) << "offsets are rebased to the frame";
  ASSERT_EQ(got[0].sample_count(), positions.size());
  for (size_t i = 0; i < positions.size(); ++i) expect_same_sample(got[0], i, column, positions[i]);
}

TEST(WireCodecColumns, NonContiguousSubsetIsAPackedCopy) {
  const Column column = float_samples("fixed", {400, 400, 400, 400, 400, 400});
  const std::vector<size_t> positions = {0, 2, 5};  // as gi % N routes them
  std::vector<const void*> frame_data;
  const std::vector<Column> got = send_columns({column}, positions, frame_data);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(points_into(frame_data[0], *column.buffer));
  size_t packed = 0;
  for (size_t p : positions) packed += column.offsets[p + 1] - column.offsets[p];
  EXPECT_EQ(got[0].buffer->size, packed);
  ASSERT_EQ(got[0].sample_count(), positions.size());
  for (size_t i = 0; i < positions.size(); ++i) expect_same_sample(got[0], i, column, positions[i]);
}

// A frame ZeroMQ received into its shared receive batch would keep the whole
// batch alive as a stored value; small ones are copied out.
TEST(WireCodecColumns, SmallFramesAreCopiedWhenReceived) {
  const Column small = float_samples("small", {100, 100});
  const Column large = float_samples("large", {transport::kReceiveBatchBytes / sizeof(float), 1});
  std::vector<const void*> frame_data;
  const std::vector<Column> got = send_columns({small, large}, {}, frame_data);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(static_cast<const void*>(got[0].buffer->data), frame_data[0]);
  EXPECT_EQ(static_cast<const void*>(got[1].buffer->data), frame_data[1]);
  for (size_t i = 0; i < 2; ++i) {
    expect_same_sample(got[0], i, small, i);
    expect_same_sample(got[1], i, large, i);
  }
}

SampleView view_into(const std::shared_ptr<const Buffer>& buffer, size_t offset, size_t floats) {
  SampleView view;
  view.buffer = buffer;
  view.offset = offset;
  view.nbytes = floats * sizeof(float);
  view.dtype = DType::kFloat32;
  view.shape = {static_cast<int64_t>(floats)};
  return view;
}

// The get path: append_views into a reply after its header slot, then take_views.
std::vector<std::vector<SampleView>> send_views(const std::vector<std::vector<SampleView>>& rows, size_t fields,
                                                size_t& data_frames) {
  Frames frames(1);
  MsgpackMapWriter header;
  header.set("fields").encoded(wire::append_views(rows, fields, frames));
  frames[0] = wire::header_frame(header);
  data_frames = frames.size() - 1;
  const EncodedMap received = wire::read_header(frames, 0, "get reply", {"fields"});
  return wire::take_views(received.value("fields"), frames, 1, rows.size(), fields, "get reply");
}

TEST(WireCodecViews, BackToBackViewsShareOneFrameAndComeBackWithShapesDtypesAndBytes) {
  std::vector<float> values(4096);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  const auto first = Buffer::copy_of(std::as_bytes(std::span(values)));
  const auto second = Buffer::copy_of(std::as_bytes(std::span(values)));
  const auto text = Buffer::copy_of(bytes_of(std::string_view("hello world")));
  SampleView object;
  object.buffer = text;
  object.offset = 6;
  object.nbytes = 5;
  object.shape = {5};
  object.is_object = true;
  // Field 0: rows 0-2 back to back in `first` (one frame), row 3 in `second`.
  // Field 1: a gap in `first` between rows 0 and 1 (two frames), then an
  // object and an empty tensor.
  const std::vector<std::vector<SampleView>> rows = {
      {view_into(first, 0, 300), view_into(first, 0, 10)},
      {view_into(first, 1200, 256), view_into(first, 2000, 256)},
      {view_into(first, 2224, 500), object},
      {view_into(second, 400, 700), view_into(second, 0, 0)},
  };
  size_t data_frames = 0;
  const auto got = send_views(rows, 2, data_frames);
  EXPECT_EQ(data_frames, 2u + 4u);
  ASSERT_EQ(got.size(), rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    ASSERT_EQ(got[r].size(), 2u);
    for (size_t f = 0; f < 2; ++f) {
      const SampleView& want = rows[r][f];
      const SampleView& have = got[r][f];
      EXPECT_EQ(have.shape, want.shape) << "row " << r << " field " << f;
      EXPECT_EQ(have.dtype, want.dtype);
      EXPECT_EQ(have.is_object, want.is_object);
      EXPECT_EQ(to_bytes(have.bytes()), to_bytes(want.bytes())) << "row " << r << " field " << f;
    }
  }
  EXPECT_EQ(got[0][0].buffer, got[2][0].buffer) << "one frame for the run";
  EXPECT_NE(got[2][0].buffer, got[3][0].buffer);
  EXPECT_NE(got[0][1].buffer, got[1][1].buffer) << "a gap starts a new frame";
}

TEST(WireCodecViews, NoRowsNoFrames) {
  size_t data_frames = 1;
  EXPECT_TRUE(send_views({}, 3, data_frames).empty());
  EXPECT_EQ(data_frames, 0u);
}

// ---- Malformed input ----

struct SpoiledHeader {
  const char* name;
  std::function<void(Tree&)> spoil;
  std::vector<std::string> fragments;  // the message names the problem
};

void expect_each_rejected(const Tree& valid, const std::vector<SpoiledHeader>& cases,
                          const std::function<void(const Tree&)>& decode) {
  ASSERT_NO_THROW(decode(valid));
  for (const SpoiledHeader& c : cases) {
    Tree spoiled = valid;
    c.spoil(spoiled);
    EXPECT_TRUE(throws_error(
        ErrorCode::kInvalidArgument, [&] { decode(spoiled); }, c.fragments))
        << c.name;
  }
}

Tree int64_binary(std::vector<int64_t> values) { return Tree::numbers(std::span<const int64_t>(values)); }

TEST(WireCodecMalformed, BatchMetaFieldsAreCheckedByNameTypeAndSize) {
  const BatchMeta meta = sample_batch_meta();
  const std::string n = std::to_string(meta.size());
  const std::vector<SpoiledHeader> cases = {
      {"unknown key", [](Tree& h) { h["bogus"] = 1; }, {"unknown field 'bogus'"}},
      {"missing key", [](Tree& h) { h.erase("indexes"); }, {"lacks the field 'indexes'"}},
      {"generations short of the count",
       [](Tree& h) {
         h["generations"] = Tree::numbers(std::span<const uint64_t>(std::vector<uint64_t>{1, 2}));
       },
       {"'generations'", "one generation per sample"}},
      {"partial generation",
       [](Tree& h) { h["generations"] = Tree::binary(std::vector<uint8_t>(9)); },
       {"'generations'", "partial element"}},
      {"indexes not binary",
       [](Tree& h) {
         h["indexes"] = Tree::array({1, 2});
       },
       {"'indexes'", "binary array"}},
      {"partial index",
       [](Tree& h) { h["indexes"] = Tree::binary(std::vector<uint8_t>(7)); },
       {"'indexes'", "partial element"}},
      {"partitions not strings", [](Tree& h) { h["partitions"] = Tree::array({1}); }, {"'partitions'", "strings"}},
      {"one end too few",
       [](Tree& h) { h["partition_ends"] = Tree::numbers(std::span<const uint64_t>()); },
       {"'partition_ends'", "one end per partition"}},
      {"ends descend",
       [](Tree& h) {
         h["partition_ends"] = int64_binary({2, 1, 5});
       },
       {"'partition_ends'", "ascend"}},
      {"ends short of the count",
       [](Tree& h) {
         h["partition_ends"] = int64_binary({1, 2, 3});
       },
       {"'partition_ends'", "sample count " + n}},
      {"produced short",
       [](Tree& h) { h["produced"] = Tree::binary(std::vector<uint8_t>(3)); },
       {"'produced'", "one flag per sample and field"}},
      {"schema not a map", [](Tree& h) { h["schema"] = "x"; }, {"schema must be a map"}},
      {"schema unknown dtype", [](Tree& h) { h["schema"]["reward"]["dtype"] = "float128"; }, {"float128"}},
      {"schema flag not bool",
       [](Tree& h) { h["schema"]["reward"]["nested"] = 1; },
       {"'reward'", "'nested'", "must be a boolean, got number"}},
      {"custom_meta offsets short",
       [](Tree& h) { h["custom_meta_offsets"] = Tree::binary(std::vector<uint8_t>(4)); },
       {"'custom_meta_offsets'", "one offset per sample"}},
      {"custom_meta offsets past the bytes",
       [&](Tree& h) {
         std::vector<uint32_t> offsets = meta.custom_meta.offsets();
         offsets.back() += 1;
         h["custom_meta_offsets"] = Tree::numbers(std::span<const uint32_t>(offsets));
       },
       {"custom_meta offsets", "end at the byte count"}},
      {"custom_meta entry not a map",
       [&](Tree& h) {
         const std::string entry = Tree::array({1, 2}).bytes();
         h["custom_meta"] = Tree::binary(entry);
         std::vector<uint32_t> offsets(meta.size() + 1, static_cast<uint32_t>(entry.size()));
         offsets[0] = 0;
         h["custom_meta_offsets"] = Tree::numbers(std::span<const uint32_t>(offsets));
       },
       {"'custom_meta' entry 0", "MessagePack map"}},
      {"extra_info not a map", [](Tree& h) { h["extra_info"] = Tree::array(); }, {"'extra_info'", "must be a map"}},
  };
  expect_each_rejected(encode_batch_meta(meta), cases, [](const Tree& h) { decode_batch_meta(h, "get_meta reply"); });
}

TEST(WireCodecMalformed, KvListFieldsAreCheckedByNameTypeAndSize) {
  auto u32_binary = [](std::vector<uint32_t> values) { return Tree::numbers(std::span<const uint32_t>(values)); };
  auto u64_binary = [](std::vector<uint64_t> values) { return Tree::numbers(std::span<const uint64_t>(values)); };
  const std::vector<SpoiledHeader> cases = {
      {"unknown key", [](Tree& h) { h["bogus"] = 1; }, {"unknown field 'bogus'"}},
      {"missing keys", [](Tree& h) { h.erase("keys"); }, {"lacks the field 'keys'"}},
      {"partitions not strings",
       [](Tree& h) {
         h["partitions"] = Tree::array({1, 2, 3});
       },
       {"'partitions'"}},
      {"one end too few",
       [&](Tree& h) {
         h["partition_ends"] = u64_binary({3, 3});
       },
       {"one end per partition"}},
      {"ends descend",
       [&](Tree& h) {
         h["partition_ends"] = u64_binary({3, 1, 4});
       },
       {"'partition_ends'"}},
      {"ends past the key count",
       [&](Tree& h) {
         h["partition_ends"] = u64_binary({3, 3, 5});
       },
       {"'partition_ends'", "key count"}},
      {"ends short of the key count",
       [&](Tree& h) {
         h["partition_ends"] = u64_binary({3, 3, 3});
       },
       {"'partition_ends'", "end at the key count 4"}},
      {"key offsets past the bytes",
       [&](Tree& h) {
         h["key_offsets"] = u32_binary({0, 5, 5, 12, 99});
       },
       {"'key_offsets'", "ascend from 0"}},
      {"key offsets descend",
       [&](Tree& h) {
         h["key_offsets"] = u32_binary({0, 5, 3, 12, 13});
       },
       {"'key_offsets'", "ascend from 0"}},
      {"no key offsets", [&](Tree& h) { h["key_offsets"] = u32_binary({}); }, {"'key_offsets'"}},
      {"one tag offset too few",
       [&](Tree& h) {
         h["tag_offsets"] = u32_binary({0, 0, 0, 0});
       },
       {"'tag_offsets'", "one offset per key"}},
      {"tag offsets past the bytes",
       [&](Tree& h) {
         h["tag_offsets"] = u32_binary({0, 0, 0, 0, 99});
       },
       {"'tag_offsets'", "ascend from 0"}},
      {"one version too few",
       [&](Tree& h) {
         h["versions"] = u64_binary({1, 2, 3, 4, 5});
       },
       {"'versions'", "an epoch and a count per partition"}},
      {"no unchanged flags", [](Tree& h) { h.erase("unchanged"); }, {"lacks the field 'unchanged'"}},
      {"an unchanged flag of 2",
       [](Tree& h) {
         h["unchanged"] = Tree::binary(std::vector<uint8_t>{0, 2, 0});
       },
       {"'unchanged'", "flags of 0 or 1"}},
      {"an unchanged partition with keys",
       [](Tree& h) {
         h["unchanged"] = Tree::binary(std::vector<uint8_t>{1, 0, 0});
       },
       {"'unchanged'", "listed with keys"}},
  };
  expect_each_rejected(encode_kv_list(sample_listing()), cases,
                       [](const Tree& h) { decode_kv_list(h, "kv_list reply"); });
}

// Received tags are checked where they are decoded, naming the key.
TEST(WireCodecKvList, AReceivedTagThatIsNoMapIsRefusedWhenDecoded) {
  Tree header = encode_kv_list(sample_listing());
  const std::string entry = Tree::array({1}).bytes();
  const std::string deep = nested_msgpack(200000);
  const std::string tags = entry + deep;
  const auto first = static_cast<uint32_t>(entry.size()), all = static_cast<uint32_t>(tags.size());
  header["tags"] = Tree::binary(tags);
  header["tag_offsets"] = Tree::numbers(std::span<const uint32_t>(std::vector<uint32_t>{0, first, all, all, all}));
  const auto listed = decode_kv_list(header, "kv_list reply");
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { listed[0].tag(0); },
                           {"tag of key 'uid-1'", "'train'", "not a MessagePack map"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { listed[0].tag(1); }, {"tag of key ''", "nests"}));
  EXPECT_EQ(listed[2].tag(0), Value::object());  // "val"'s key: no bytes left, {}
}

TEST(WireCodecMalformed, DeeplyNestedCustomMetaIsRejectedNotRecursedInto) {
  // The header itself is shallow; the nesting hides inside a binary entry.
  BatchMeta meta;
  meta.global_indexes = {1};
  meta.partition_ids.append(1, "p");
  Tree header = encode_batch_meta(meta);
  const std::string entry = nested_msgpack(200000);
  header["custom_meta"] = Tree::binary(std::vector<uint8_t>(entry.begin(), entry.end()));
  header["custom_meta_offsets"] =
      Tree::numbers(std::span<const uint32_t>(std::vector<uint32_t>{0, static_cast<uint32_t>(entry.size())}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { decode_batch_meta(header, "r"); },
                           {"'custom_meta' entry 0", "nests deeper than " + std::to_string(kMaxDecodeNesting)}));
}

TEST(WireCodecMalformed, MetaRequestFieldsAreCheckedByNameAndType) {
  MetaRequest request;
  request.fields = {"x"};
  request.batch_size = 4;
  request.partition_id = "p";
  request.task_name = "t";
  const std::vector<SpoiledHeader> cases = {
      {"unknown key", [](Tree& h) { h["sampler"] = "x"; }, {"unknown field 'sampler'"}},
      {"missing key", [](Tree& h) { h.erase("task_name"); }, {"lacks the field 'task_name'"}},
      {"batch_size a string",
       [](Tree& h) { h["batch_size"] = "4"; },
       {"'batch_size'", "must be an integer, got string"}},
      {"batch_size a float", [](Tree& h) { h["batch_size"] = 4.5; }, {"'batch_size'", "must be an integer"}},
      {"batch_size beyond int64",
       [](Tree& h) { h["batch_size"] = uint64_t{1} << 63; },
       {"'batch_size'", "out of range"}},
      {"polling an integer", [](Tree& h) { h["polling"] = 1; }, {"'polling'", "must be a boolean"}},
      {"fields a string", [](Tree& h) { h["fields"] = "x"; }, {"'fields'", "array of strings"}},
      {"unknown mode", [](Tree& h) { h["mode"] = "steal"; }, {"steal"}},
  };
  expect_each_rejected(encode_meta_request(request), cases,
                       [](const Tree& h) { decode_meta_request(h, "get_meta request"); });
}

TEST(WireCodecMalformed, StatusNeedsOneFlagPerIndex) {
  const std::vector<SpoiledHeader> cases = {
      {"flags short",
       [](Tree& h) { h["flags"] = Tree::binary(std::vector<uint8_t>(1)); },
       {"'flags'", "one flag per index"}},
      {"flags missing", [](Tree& h) { h.erase("flags"); }, {"lacks the field 'flags'"}},
  };
  expect_each_rejected(encode_status({{1, true}, {2, false}}), cases,
                       [](const Tree& h) { decode_status(h, "status reply"); });
}

TEST(WireCodecMalformed, HeaderFramesThatAreNotMessagePackMapsAreRejected) {
  Frames none;
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { wire::read_header(none, 0, "put request", {}); },
                           {"put request", "header frame at position 0", "got 0 frames"}));

  std::string valid = encode_batch_meta(sample_batch_meta()).bytes();
  for (size_t keep : {size_t{0}, size_t{1}, valid.size() / 2, valid.size() - 1}) {
    const std::string truncated = valid.substr(0, keep);
    EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                             [&] { wire::read_header(frames_of_bytes(truncated), 0, "get reply", {}); },
                             {"get reply header is not valid MessagePack"}))
        << "kept " << keep << " of " << valid.size() << " bytes";
  }
  valid.push_back('\xc0');  // trailing bytes after a complete map
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { wire::read_header(frames_of_bytes(valid), 0, "m", {}); },
                           {"not valid MessagePack"}));

  const std::pair<Tree, std::string> not_maps[] = {
      {Tree::array({1, 2}), "array"}, {Tree(7), "number"}, {Tree("text"), "string"}, {Tree(nullptr), "null"}};
  for (const auto& [not_a_map, type] : not_maps) {
    EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                             [&] { wire::read_header(frames_of_bytes(not_a_map.bytes()), 0, "m", {}); },
                             {"must be a MessagePack map, got " + type}));
  }
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] { wire::read_header(frames_of_bytes(std::vector<uint8_t>{0xc1}), 0, "m", {}); },
                           {"not valid MessagePack"}));
}

// A map with one entry per MessagePack format, spelled out byte by byte (an
// encoder only ever picks the shortest form), and a key repeated.
std::vector<uint8_t> every_format() {
  std::vector<uint8_t> b;
  const auto big_endian = [&](uint64_t value, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) b.push_back(static_cast<uint8_t>(value >> (8 * i)));
  };
  const auto key = [&](std::string_view k) {
    b.push_back(static_cast<uint8_t>(0xa0 | k.size()));
    b.insert(b.end(), k.begin(), k.end());
  };
  const auto bytes = [&](size_t count, uint8_t fill) { b.insert(b.end(), count, fill); };
  uint32_t f32 = 0;
  const float one_and_half = 1.5f;
  std::memcpy(&f32, &one_and_half, sizeof f32);
  uint64_t f64 = 0;
  const double minus = -2.25;
  std::memcpy(&f64, &minus, sizeof f64);
  b.push_back(0xde);
  big_endian(30, 2);
  key("pos_fixint"), b.push_back(0x05);
  key("neg_fixint"), b.push_back(0xfb);
  key("nil"), b.push_back(0xc0);
  key("false"), b.push_back(0xc2);
  key("true"), b.push_back(0xc3);
  key("u8"), b.push_back(0xcc), big_endian(200, 1);
  key("u16"), b.push_back(0xcd), big_endian(60000, 2);
  key("u32"), b.push_back(0xce), big_endian(4000000000u, 4);
  key("u64"), b.push_back(0xcf), big_endian((uint64_t{1} << 63) + 5, 8);
  key("i8"), b.push_back(0xd0), big_endian(0x80, 1);
  key("i16"), b.push_back(0xd1), big_endian(0x8000, 2);
  key("i32"), b.push_back(0xd2), big_endian(0xfffffffe, 4);
  key("i64"), b.push_back(0xd3), big_endian(uint64_t{1} << 63, 8);
  key("f32"), b.push_back(0xca), big_endian(f32, 4);
  key("f64"), b.push_back(0xcb), big_endian(f64, 8);
  key("str8"), b.push_back(0xd9), big_endian(3, 1), bytes(3, 'a');
  key("str16"), b.push_back(0xda), big_endian(300, 2), bytes(300, 's');
  key("str32"), b.push_back(0xdb), big_endian(70000, 4), bytes(70000, 't');
  key("bin8"), b.push_back(0xc4), big_endian(2, 1), bytes(2, 1);
  key("bin16"), b.push_back(0xc5), big_endian(300, 2), bytes(300, 2);
  key("bin32"), b.push_back(0xc6), big_endian(70000, 4), bytes(70000, 3);
  key("fixext1"), b.push_back(0xd4), b.push_back(0x01), bytes(1, 4);
  key("fixext16"), b.push_back(0xd8), b.push_back(0x7f), bytes(16, 5);
  key("ext8"), b.push_back(0xc7), big_endian(3, 1), b.push_back(0xfe), bytes(3, 6);
  key("ext32"), b.push_back(0xc9), big_endian(5, 4), b.push_back(0x02), bytes(5, 7);
  key("array16"), b.push_back(0xdc), big_endian(2, 2), b.push_back(0x01), b.push_back(0xa1), b.push_back('z');
  key("array32"), b.push_back(0xdd), big_endian(1, 4), b.push_back(0x90);
  key("map32"), b.push_back(0xdf), big_endian(1, 4), key("k"), b.push_back(0x80);
  key("repeated"), b.push_back(0x01);
  key("repeated"), b.push_back(0x02);
  return b;
}

TEST(WireCodecHeader, EveryMessagePackFormatReadsAsWritten) {
  const std::vector<uint8_t> bytes = every_format();
  const Frames frames = frames_of_bytes(bytes);
  const EncodedMap header = EncodedMap::skipping_unknown(transport::as_string_view(frames[0]), 0, "m",
                                                         {"neg_fixint", "nil", "true", "u64", "i8", "i64", "f32", "f64",
                                                          "str32", "bin32", "ext8", "array16", "map32", "repeated"});
  EXPECT_EQ(header.integer("repeated"), 2) << "the last value of a repeated key wins";
  EXPECT_EQ(header.integer("neg_fixint"), -5);
  EXPECT_EQ(header.integer("i8"), -128);
  EXPECT_EQ(header.integer("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(header.unsigned_integer("u64"), (uint64_t{1} << 63) + 5);
  EXPECT_TRUE(throws_invalid([&] { header.integer("u64"); }, {"'u64' is out of range"}));
  EXPECT_TRUE(header.boolean("true"));
  EXPECT_FALSE(header.has("nil"));
  EXPECT_EQ(header.decoded("f32"), Value(1.5));
  EXPECT_EQ(header.decoded("f64"), Value(-2.25));
  EXPECT_EQ(header.binary("bin32").size(), 70000u);
  EXPECT_EQ(header.binary("ext8"), std::string(3, '\x06')) << "an ext value reads as its bytes";
  EXPECT_EQ(header.text("str32").size(), 70000u);
  EXPECT_EQ(header.decoded("array16"), Value::array({1, "z"}));
  EXPECT_EQ(header.decoded("map32"), (Value{{"k", Value::object()}}));
  const Tree tree = Tree::read(transport::as_string_view(frames[0]));
  EXPECT_EQ(tree.size(), 29u) << "the repeated key counts once";
  EXPECT_EQ(tree.at("repeated"), Tree(uint64_t{2}));
  EXPECT_EQ(tree.at("u8"), Tree(uint64_t{200}));
  EXPECT_EQ(tree.at("i16"), Tree(int64_t{-32768}));
}

TEST(WireCodecHeader, EveryTruncationAndNonStringKeysAreInvalid) {
  const std::vector<uint8_t> bytes = every_format();
  for (size_t keep = 0; keep < bytes.size(); keep += keep < 2000 ? 1 : keep / 16) {
    EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                             [&] {
                               wire::read_header(frames_of_bytes({bytes.begin(), bytes.begin() + keep}), 0, "m", {});
                             },
                             {"m header is not valid MessagePack"}))
        << "kept " << keep;
  }
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] {
                             wire::read_header(frames_of_bytes(std::vector<uint8_t>{0x81, 0x01, 0x02}), 0, "m", {});
                           },
                           {"not valid MessagePack", "a map key is not a string"}));
}

TEST(WireCodecMalformed, NestingBeyondTheLimitIsRefusedAtAnyDepth) {
  EXPECT_TRUE(wire::read_header(frames_of_bytes(nested_msgpack(kMaxDecodeNesting)), 0, "m", {"x"}).has("x"));
  const std::string limit = std::to_string(kMaxDecodeNesting);
  for (size_t depth : {kMaxDecodeNesting + 1, size_t{100000}, size_t{1} << 22}) {
    EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                             [&] { wire::read_header(frames_of_bytes(nested_msgpack(depth)), 0, "m", {"x"}); },
                             {"nests deeper than " + limit + " levels"}))
        << "depth " << depth;
  }
}

// A valid one-column put: header entries plus its data frame.
struct PutMessage {
  Tree entries;   // the columns: an array of maps
  Frames frames;  // [header slot, data frames...]
  size_t samples;
};

PutMessage put_message(const std::vector<Column>& columns) {
  PutMessage put{Tree(), Frames(1), columns.front().sample_count()};
  put.entries = Tree::read(wire::append_columns(columns, {}, put.frames));
  return put;
}

TEST(WireCodecMalformed, ColumnsAreCheckedAgainstTheirFrames) {
  const std::vector<Column> columns = {float_samples("a", {4, 4, 4}), float_samples("b", {1, 2, 3})};
  PutMessage put = put_message(columns);
  const auto take = [&](const Tree& entries, Frames frames, size_t samples) {
    wire::take_columns(entries.bytes(), frames, 1, samples, "put request");
  };
  ASSERT_NO_THROW(take(put.entries, copies(put.frames), put.samples));

  Frames missing = copies(put.frames);
  missing.pop_back();
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { take(put.entries, std::move(missing), put.samples); },
                           {"put request", "names 2 columns but carries 1 data frames"}));
  Frames extra = copies(put.frames);
  extra.push_back(transport::copy_frame(std::string_view("x")));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { take(put.entries, std::move(extra), put.samples); },
                           {"names 2 columns but carries 3 data frames"}));

  const std::vector<SpoiledHeader> cases = {
      {"not an array", [](Tree& e) { e = Tree::map(); }, {"columns must be an array"}},
      {"unknown key", [](Tree& e) { e[1]["stride"] = 4; }, {"column 1", "unknown field 'stride'"}},
      {"missing key", [](Tree& e) { e[0].erase("offsets"); }, {"column 0", "lacks the field 'offsets'"}},
      {"offsets count",
       [](Tree& e) { e[0]["offsets"] = Tree::numbers(std::span<const uint64_t>()); },
       {"column 0", "'offsets'", "must hold 4 offsets"}},
      {"offset past the frame",
       [&](Tree& e) {
         std::vector<uint64_t> offsets(columns[1].offsets.begin(), columns[1].offsets.end());
         offsets.back() = columns[1].buffer->size + 4;
         e[1]["offsets"] = Tree::numbers(std::span<const uint64_t>(offsets));
       },
       {"\"b\"", "beyond the buffer of " + std::to_string(columns[1].buffer->size) + " bytes"}},
      {"shape against bytes",
       [](Tree& e) { e[0]["shapes"] = Tree::array({int64_binary({5})}); },
       {"\"a\"", "needs 20 bytes"}},
      {"shape count",
       [](Tree& e) {
         e[1]["shapes"] = Tree::array({int64_binary({1}), int64_binary({2})});
       },
       {"column 1", "'shapes'", "one shape or one per sample"}},
      {"shape not binary",
       [](Tree& e) {
         e[1]["shapes"] = Tree::array({1, 2, 3});
       },
       {"'shapes'", "binary int64 shapes"}},
      {"unknown dtype", [](Tree& e) { e[0]["dtype"] = "complex64"; }, {"complex64"}},
  };
  for (const SpoiledHeader& c : cases) {
    Tree spoiled = put.entries;
    c.spoil(spoiled);
    EXPECT_TRUE(throws_error(
        ErrorCode::kInvalidArgument, [&] { take(spoiled, copies(put.frames), put.samples); }, c.fragments))
        << c.name;
  }
}

TEST(WireCodecMalformed, ViewsAreCheckedAgainstTheirFrames) {
  const auto buffer = Buffer::copy_of(bytes_of(std::vector<float>(1024, 1.0f)));
  const std::vector<std::vector<SampleView>> rows = {{view_into(buffer, 0, 512)}, {view_into(buffer, 2048, 512)}};
  Frames frames(1);
  const Tree valid = Tree::read(wire::append_views(rows, 1, frames));
  const auto take = [&](const Tree& entries, size_t rows_expected, size_t fields) {
    Frames copy = copies(frames);
    wire::take_views(entries.bytes(), copy, 1, rows_expected, fields, "get reply");
  };
  ASSERT_NO_THROW(take(valid, 2, 1));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { take(valid, 2, 2); }, {"get reply", "2 fields"}));
  EXPECT_TRUE(
      throws_error(ErrorCode::kInvalidArgument, [&] { take(valid, 3, 1); }, {"'frames'", "one entry per sample"}));

  const auto u64 = [](std::vector<uint64_t> v) { return Tree::numbers(std::span<const uint64_t>(v)); };
  const std::vector<SpoiledHeader> cases = {
      {"frame that is not there",
       [](Tree& e) {
         e[0]["frames"] = Tree::numbers(std::span<const uint32_t>(std::vector<uint32_t>{0, 1}));
       },
       {"'frames'", "names a frame that is not there"}},
      {"offset outside the frame",
       [&](Tree& e) {
         e[0]["offsets"] = u64({0, 4096});
       },
       {"'offsets'", "points outside its frame"}},
      {"size outside the frame",
       [&](Tree& e) {
         e[0]["sizes"] = u64({2048, 4096});
       },
       {"'offsets'", "points outside its frame"}},
      {"offset plus size wraps around",
       [&](Tree& e) {
         e[0]["offsets"] = u64({0, 8});
         e[0]["sizes"] = u64({2048, ~uint64_t{0} - 4});
       },
       {"points outside its frame"}},
      {"unknown dtype",
       [](Tree& e) {
         e[0]["dtypes"] = Tree::binary(std::vector<uint8_t>{8, 200});
       },
       {"'dtypes'", "unknown dtype"}},
      {"shape against bytes",
       [](Tree& e) {
         e[0]["shapes"] = Tree::array({int64_binary({512}), int64_binary({3})});
       },
       {"'shapes'", "sample 1", "needs 12 bytes"}},
      {"negative dimension",
       [](Tree& e) {
         e[0]["shapes"] = Tree::array({int64_binary({512}), int64_binary({-512})});
       },
       {"negative"}},
      // 2^62 float32 elements are 2^64 bytes: must not wrap around to 0.
      {"element count overflowing the byte size",
       [&](Tree& e) {
         e[0]["sizes"] = u64({2048, 0});
         e[0]["shapes"] = Tree::array({int64_binary({512}), int64_binary({int64_t{1} << 62})});
       },
       {"'shapes'", "sample 1", "overflows"}},
      {"missing key", [](Tree& e) { e[0].erase("dtypes"); }, {"lacks the field 'dtypes'"}},
      {"unknown key", [](Tree& e) { e[0]["strides"] = 1; }, {"unknown field 'strides'"}},
  };
  for (const SpoiledHeader& c : cases) {
    Tree spoiled = valid;
    c.spoil(spoiled);
    EXPECT_TRUE(throws_error(
        ErrorCode::kInvalidArgument, [&] { take(spoiled, 2, 1); }, c.fragments))
        << c.name;
  }
}

TEST(WireCodecColumns, DescribedColumnsLayTheirSamplesOutAsAppendedFramesDo) {
  const std::vector<Column> columns{int64_column("x", {1, 2, 3, 4, 5}),
                                    object_column("o", {"a", "bcd", "", "ef", "g"})};
  for (const std::vector<size_t>& positions : {std::vector<size_t>{4, 1, 3}, std::vector<size_t>{}}) {
    Frames frames;
    const std::string appended = wire::append_columns(columns, positions, frames);
    std::vector<std::vector<std::span<const std::byte>>> pieces;
    EXPECT_EQ(wire::describe_columns(columns, positions, pieces), appended);
    ASSERT_EQ(pieces.size(), frames.size());
    for (size_t c = 0; c < pieces.size(); ++c) {
      Bytes assembled;
      for (const auto& piece : pieces[c]) assembled.insert(assembled.end(), piece.begin(), piece.end());
      EXPECT_EQ(assembled, to_bytes(transport::as_bytes(frames[c]))) << "column " << c;
    }
  }
}

}  // namespace
}  // namespace seqflow::test
