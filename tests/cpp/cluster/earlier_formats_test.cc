// Bytes written by an earlier build still read (tests/data/README.md): every
// wire message of the decoder table and a checkpoint directory. Run with
// SEQFLOW_WRITE_FORMAT_FIXTURES=1 to write them again from this build.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "../../fuzz/protocol_decoders.h"
#include "common/msgpack_reader.h"
#include "common/msgpack_writer.h"
#include "controller_test_support.h"
#include "seqflow/client.h"
#include "seqflow/sampler.h"
#include "storage_test_support.h"

namespace seqflow {
namespace {

const std::string kData = SEQFLOW_TEST_DATA_DIR;
const std::string kWireMessages = kData + "/wire/messages.msgpack";
const std::string kCheckpoint = kData + "/checkpoints/value_model_embedded";

bool writing_fixtures() { return std::getenv("SEQFLOW_WRITE_FORMAT_FIXTURES") != nullptr; }

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << path;
  return {std::istreambuf_iterator<char>(in), {}};
}

using FrameBytes = std::vector<std::string>;

FrameBytes bytes_of(const transport::Frames& frames) {
  FrameBytes out;
  for (const auto& frame : frames) {
    const auto bytes = transport::as_bytes(frame);
    out.emplace_back(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  return out;
}

// The saved messages: a map of decoder name -> array of frames (binaries).
std::map<std::string, FrameBytes> read_wire_messages() {
  const std::string bytes = file_bytes(kWireMessages);
  MsgpackReader reader(bytes, 3);
  std::map<std::string, FrameBytes> out;
  const auto map = reader.next(0);
  for (uint64_t m = 0; m < map.number; ++m) {
    FrameBytes& frames = out[std::string(reader.key())];
    const auto array = reader.next(1);
    for (uint64_t f = 0; f < array.number; ++f) frames.emplace_back(reader.next(2).bytes);
  }
  reader.finish();
  return out;
}

void write_wire_messages() {
  const auto& table = test::protocol_decoders();
  MsgpackWriter writer;
  writer.map(table.size());
  for (const auto& decoder : table) {
    writer.string(decoder.name);
    const FrameBytes frames = bytes_of(decoder.seed());
    writer.array(frames.size());
    for (const std::string& frame : frames) writer.binary(std::as_bytes(std::span(frame)));
  }
  std::filesystem::create_directories(std::filesystem::path(kWireMessages).parent_path());
  std::ofstream(kWireMessages, std::ios::binary | std::ios::trunc) << writer.bytes();
}

TEST(EarlierWireMessages, EveryDecoderReadsItsSavedMessage) {
  if (writing_fixtures()) write_wire_messages();
  const auto saved = read_wire_messages();
  for (const auto& decoder : test::protocol_decoders()) {
    SCOPED_TRACE(decoder.name);
    const auto message = saved.find(std::string(decoder.name));
    ASSERT_NE(message, saved.end()) << "no saved message: write the fixtures again";
    transport::Frames frames;
    for (const std::string& frame : message->second) frames.push_back(transport::copy_frame(frame));
    EXPECT_NO_THROW(decoder.decode(frames, decoder.rows, decoder.fields));
  }
}

// The encoders write what the earlier build wrote, so a peer of either
// build decodes the other's messages to the same content.
TEST(EarlierWireMessages, TheEncodersWriteTheSavedBytes) {
  const auto saved = read_wire_messages();
  for (const auto& decoder : test::protocol_decoders()) {
    SCOPED_TRACE(decoder.name);
    const auto message = saved.find(std::string(decoder.name));
    ASSERT_NE(message, saved.end());
    EXPECT_EQ(bytes_of(decoder.seed()), message->second);
  }
}

// A seqlen-balanced sampler, so that the checkpoint holds a reserved answer.
std::shared_ptr<Client> fixture_client() {
  ControllerOptions options{make_seqlen_balanced_sampler(2, 2), false};
  return make_embedded_client(std::move(options), {});
}

const Value kUserMetadata{{"step", 7}, {"lr", 0.25}, {"name", "run"}, {"tags", Value::array({1, "a", nullptr})}};

// Eight samples of field "x" (int64, one per sample: its index) with
// lengths, one batch consumed by rank 0 of "actor" (rank 1's answer
// reserved), two keys with tags and three timings of "actor".
void populate(Client& client) {
  Column x;
  x.field = "x";
  x.dtype = DType::kInt64;
  x.shapes = {{1}};
  const std::vector<int64_t> values = {0, 1, 2, 3, 4, 5, 6, 7};
  for (size_t i = 0; i <= values.size(); ++i) x.offsets.push_back(i * sizeof(int64_t));
  x.buffer = Buffer::copy_of(std::as_bytes(std::span(values)));
  std::vector<Value> meta = test::lengths_meta({5, 9, 1, 7, 3, 3, 8, 2});
  meta[1]["group"] = "g";
  meta[2]["score"] = -0.5;
  meta[3]["nested"] = Value::array({Value{{"k", uint64_t{1} << 63}}, false});
  client.put_new("train", {x}, meta);
  EXPECT_EQ(client.get_meta(test::fetch_request("train", "actor", {"x"}, 2, 0)).size(), 2u);
  const std::vector<std::string> keys = {"k1", "k2"};
  const std::vector<Value> tags = {{{"status", "ok"}}, Value::object()};
  client.kv_put("kv", keys, tags, {});
  const std::vector<TimingRecord> records = {{{100, 200}, 0.01}, {{50}, 0.002}, {{4000}, 0.3}};
  client.control().report_timing("actor", records);
}

// Equal but for generations, which a load moves on (Controller::load).
void expect_same_samples(BatchMeta got, BatchMeta want) {
  got.generations.clear();
  want.generations.clear();
  test::expect_same_batch_meta(got, want);
}

// What a client shows of the fixture's state; two clients that agree here
// hold the same checkpoint content.
void expect_same_state(Client& got, Client& want) {
  ControlPlane& g = got.control();
  ControlPlane& w = want.control();
  EXPECT_EQ(g.partition_list(), w.partition_list());
  EXPECT_EQ(g.consumption_status("actor", "train"), w.consumption_status("actor", "train"));
  const std::string fields[] = {"x"};
  const auto got_produced = g.production_status(fields, "train");
  const auto want_produced = w.production_status(fields, "train");
  ASSERT_TRUE(got_produced.has_value());
  EXPECT_EQ(got_produced->global_indexes, want_produced->global_indexes);
  EXPECT_EQ(got_produced->produced, want_produced->produced);
  // Rank 1 is handed the answer reserved when rank 0 fetched.
  const BatchMeta got_reserved = got.get_meta(test::fetch_request("train", "actor", {"x"}, 2, 1));
  const BatchMeta want_reserved = want.get_meta(test::fetch_request("train", "actor", {"x"}, 2, 1));
  expect_same_samples(got_reserved, want_reserved);
  const BatchMeta got_all = got.get_meta(test::fetch_request("train", "reader", {"x"}, 8));
  const BatchMeta want_all = want.get_meta(test::fetch_request("train", "reader", {"x"}, 8));
  expect_same_samples(got_all, want_all);
  const auto got_rows = got.get_data(got_all, fields);
  const auto want_rows = want.get_data(want_all, fields);
  ASSERT_EQ(got_rows.size(), want_rows.size());
  for (size_t i = 0; i < got_rows.size(); ++i) {
    const auto got_bytes = got_rows[i][0].bytes();
    const auto want_bytes = want_rows[i][0].bytes();
    EXPECT_TRUE(std::equal(got_bytes.begin(), got_bytes.end(), want_bytes.begin(), want_bytes.end()));
  }
  const std::string keys[] = {"k1", "k2"};
  expect_same_samples(got.kv_meta("kv", keys), want.kv_meta("kv", keys));
  ASSERT_TRUE(g.task_workload("actor").has_value());
  EXPECT_EQ(g.task_workload("actor")->reports, w.task_workload("actor")->reports);
}

TEST(EarlierCheckpoint, ADirectorySavedByAnEarlierBuildLoadsWithEverything) {
  if (writing_fixtures()) {
    std::filesystem::remove_all(kCheckpoint);
    auto writer = fixture_client();
    populate(*writer);
    writer->save_checkpoint(kCheckpoint, kUserMetadata);
  }
  auto loaded = fixture_client();
  EXPECT_EQ(loaded->load_checkpoint(kCheckpoint), kUserMetadata);
  auto made = fixture_client();
  populate(*made);

  // Saved again by this build and loaded once more, it still holds the same.
  test::TempDir dir;
  const std::string again = dir.file("again");
  loaded->save_checkpoint(again, kUserMetadata);
  auto reloaded = fixture_client();
  EXPECT_EQ(reloaded->load_checkpoint(again), kUserMetadata);

  expect_same_state(*loaded, *made);
  made = fixture_client();
  populate(*made);
  expect_same_state(*reloaded, *made);
}

// The controller's file of the fixture, saved again by this build, holds
// the bytes the earlier build wrote (but the generation counter, which a
// load moves on): the same keys in the same order, numbers in the same forms.
TEST(EarlierCheckpoint, TheControllerFileSavedAgainKeepsItsBytes) {
  const std::string earlier = kCheckpoint + "/controller.ckpt";
  Controller controller(ControllerOptions{make_seqlen_balanced_sampler(2, 2), false});
  controller.start_from(earlier);
  const test::TempFile again("again");
  controller.save(again.path());
  test::Tree want = test::Tree::read(test::read_checkpoint_payload(earlier));
  test::Tree got = test::Tree::read(test::read_checkpoint_payload(again.path()));
  ASSERT_TRUE(got.contains("next_generation"));
  want.erase("next_generation");
  got.erase("next_generation");
  EXPECT_EQ(got.bytes(), want.bytes());
}

}  // namespace
}  // namespace seqflow
