// The get_meta messages read and written as frames, without a tree: they
// round-trip, read any key order and form a peer may write, and refuse
// malformed frames with the read_header messages.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "controller_test_support.h"
#include "transport/wire_codec.h"
#include "test_support.h"
#include "wire_test_support.h"

namespace seqflow::test {
namespace {

using transport::Frames;
namespace wire = transport::wire;

BatchMeta two_partition_meta() {
  BatchMeta meta;
  meta.global_indexes = {9, 2, 1LL << 40};
  meta.partition_ids.append(2, "train@step_3");
  meta.partition_ids.append(1, std::string(40, 'p'));  // past the fixstr size
  meta.field_schema["ids"] = FieldSchema{DType::kInt64, {-1}, true, false};
  meta.field_schema["blob"] = FieldSchema{DType::kUInt8, {}, false, true};
  meta.production_status = {1, 0, 1, 1, 0, 1};
  meta.custom_meta.push_back({{"total_lengths", 70000}, {"tag", "a"}});
  meta.custom_meta.push_back(Value::object());
  meta.custom_meta.push_back({{"score", -0.5}});
  meta.extra_info = {{"step", -3}, {"weights", Value::array({0.5, 1.5})}};
  return meta;
}

TEST(WireCodecFrames, BatchMetaRoundTrips) {
  const BatchMeta meta = two_partition_meta();
  const Frames frames = wire::header_message(wire::batch_meta_frame(meta));
  expect_same_batch_meta(wire::read_batch_meta(frames, 0, "reply"), meta);

  const BatchMeta empty;
  const BatchMeta got = wire::read_batch_meta(wire::header_message(wire::batch_meta_frame(empty)), 0, "reply");
  EXPECT_EQ(got.size(), 0u);
  EXPECT_TRUE(got.field_schema.empty());
  EXPECT_TRUE(got.extra_info.is_object());
}

TEST(WireCodecFrames, BatchMetaReadsAnyKeyOrder) {
  // A tree writes keys sorted, not in the order batch_meta_frame does.
  const BatchMeta meta = two_partition_meta();
  expect_same_batch_meta(wire::read_batch_meta(message_of(encode_batch_meta(meta)), 0, "reply"), meta);
}

TEST(WireCodecFrames, MetaRequestRoundTripsNegativeAndLargeNumbers) {
  MetaRequest request;
  request.fields = {"input_ids", std::string(300, 'f')};
  request.batch_size = 70000;
  request.partition_id = "train";
  request.mode = MetaMode::kForceFetch;
  request.task_name = "actor";
  request.sampling.dp_rank = -1;
  request.sampling.batch_index = -40000;
  request.polling = true;
  request.timeout = std::chrono::milliseconds(int64_t{1} << 40);
  const Frames frames = wire::header_message(wire::meta_request_frame(request));
  const MetaRequest got = wire::read_meta_request(frames, 0, "request");
  expect_same_meta_request(got, request);
}

TEST(WireCodecFrames, MalformedFramesAreRefusedWithReadHeadersMessages) {
  EXPECT_TRUE(throws_invalid([] { wire::read_batch_meta(Frames(), 0, "get_meta reply"); },
                             {"get_meta reply needs a header frame at position 0", "got 0 frames"}));
  const zmq::message_t valid = wire::batch_meta_frame(two_partition_meta());
  const std::string_view bytes = transport::as_string_view(valid);
  for (size_t keep : {size_t{0}, size_t{1}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_TRUE(throws_invalid([&] { wire::read_batch_meta(frames_of_bytes(bytes.substr(0, keep)), 0, "r"); },
                               {"r header is not valid MessagePack"}))
        << "kept " << keep;
  }
  EXPECT_TRUE(throws_invalid([&] { wire::read_batch_meta(frames_of_bytes(std::string(bytes) + '\xc0'), 0, "r"); },
                             {"r header is not valid MessagePack", "1 bytes follow the value"}));
  EXPECT_TRUE(throws_invalid([] { wire::read_meta_request(message_of(Tree::array({1})), 0, "q"); },
                             {"q header must be a MessagePack map, got array"}));
  EXPECT_TRUE(throws_invalid(
      [] {
        wire::read_meta_request(message_of(Tree{{"fields", Tree::array()}}), 0, "q");
      },
      {"q lacks the field 'batch_size'"}));
}

TEST(WireCodecFrames, FieldsAreCheckedByNameAndType) {
  Tree header = encode_batch_meta(two_partition_meta());
  header["schema"]["ids"]["nested"] = 1;
  EXPECT_TRUE(throws_invalid([&] { wire::read_batch_meta(message_of(header), 0, "r"); },
                             {"r schema of 'ids' field 'nested' must be a boolean, got number"}));
  header = encode_batch_meta(two_partition_meta());
  header["schema"]["ids"]["color"] = "red";
  EXPECT_TRUE(throws_invalid([&] { wire::read_batch_meta(message_of(header), 0, "r"); },
                             {"r schema of 'ids' has an unknown field 'color'"}));
  header = encode_batch_meta(two_partition_meta());
  header["schema"]["ids"] = Tree::array();
  EXPECT_TRUE(throws_invalid([&] { wire::read_batch_meta(message_of(header), 0, "r"); },
                             {"r schema of 'ids' must be a map, got array"}));
  header = encode_batch_meta(two_partition_meta());
  header["partitions"] = Tree::array({"a", 2});
  EXPECT_TRUE(throws_invalid([&] { wire::read_batch_meta(message_of(header), 0, "r"); },
                             {"r field 'partitions' must be an array of strings"}));

  Tree request = encode_meta_request(MetaRequest{});
  request["batch_size"] = uint64_t{1} << 63;
  EXPECT_TRUE(throws_invalid([&] { wire::read_meta_request(message_of(request), 0, "q"); },
                             {"q field 'batch_size' is out of range"}));
  request = encode_meta_request(MetaRequest{});
  request["task_name"] = Tree::binary({1, 2});
  EXPECT_TRUE(throws_invalid([&] { wire::read_meta_request(message_of(request), 0, "q"); },
                             {"q field 'task_name' must be a string, got binary"}));
}

}  // namespace
}  // namespace seqflow::test
