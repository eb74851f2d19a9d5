// Controller checkpoints: a round trip keeps everything, including sampler
// state and reserved answers; a missing, damaged or foreign checkpoint is
// refused and the running state stays as it was; saving is atomic.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "controller_test_support.h"
#include "seqflow/controller.h"
#include "seqflow/sampler.h"

namespace seqflow {
namespace {

using test::fetch_request;
using test::put;
using test::read_bytes;
using test::snapshot;
using test::temp_path;
using test::TempFile;
using test::throws_code;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

Controller seqlen_controller() { return Controller(ControllerOptions{make_seqlen_balanced_sampler(2, 2), false}); }

// Partitions with produced, consumed, keyed and cleared samples, varied
// schemas and metadata, and a reserved answer waiting for rank 1.
void populate(Controller& controller) {
  const std::vector<int64_t> lengths = {5, 9, 1, 7, 3, 3, 8, 2};
  put(controller, "p", 8, {"x", "y"}, test::lengths_meta(lengths));
  controller.mark_produced("p", std::vector<int64_t>{0, 1}, {}, {{"r", test::tensor_schema({7, 3}, DType::kBFloat16)}},
                           {});
  controller.mark_produced("p", std::vector<int64_t>{2, 3}, {}, {{"r", test::tensor_schema({9, 3}, DType::kBFloat16)}},
                           {});
  ASSERT_EQ(controller.get_meta(fetch_request("p", "actor", {"x"}, 2, 0, 0)).size(), 2u);
  controller.kv_resolve("q", std::vector<std::string>{"k1", "k2"},
                        std::vector<Value>{{{"total_lengths", 4}, {"group_id", 7}}, nullptr});
  controller.insert("q", 3);
  controller.clear_samples("q", std::vector<int64_t>{9}, {});
}

void populate_and_save(Controller& controller, const std::string& path) {
  populate(controller);
  controller.save(path);
}

TEST(ControllerCheckpoint, RoundTripKeepsEverythingIncludingReservedAnswers) {
  const TempFile checkpoint("round_trip");
  Controller original = seqlen_controller();
  populate_and_save(original, checkpoint.path());

  Controller restored = seqlen_controller();
  put(restored, "junk", 3, {"z"});  // replaced by the load
  restored.load(checkpoint.path());
  EXPECT_EQ(snapshot(restored), snapshot(original));
  EXPECT_EQ(restored.partition_list(), (std::vector<std::string>{"p", "q"}));

  // Rank 1 gets its reserved share of batch 0 from both, the same one.
  const BatchMeta a = original.get_meta(fetch_request("p", "actor", {"x"}, 2, 1, 0));
  const BatchMeta b = restored.get_meta(fetch_request("p", "actor", {"x"}, 2, 1, 0));
  EXPECT_EQ(a.global_indexes, b.global_indexes);
  EXPECT_EQ(a.custom_meta, b.custom_meta);
  EXPECT_EQ(b.size(), 2u);
  // And the next batch is identical too.
  EXPECT_EQ(original.get_meta(fetch_request("p", "actor", {"x"}, 2, 0, 1)).global_indexes,
            restored.get_meta(fetch_request("p", "actor", {"x"}, 2, 0, 1)).global_indexes);

  MetaRequest force = fetch_request("p", "actor", {"r"}, 1);
  force.mode = MetaMode::kForceFetch;
  const BatchMeta r = restored.get_meta(force);
  EXPECT_EQ(r.global_indexes, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(r.production_status, (std::vector<uint8_t>{1, 1, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(r.field_schema.at("r").shape, (Shape{-1, 3}));
  EXPECT_EQ(restored.kv_lookup("q", std::vector<std::string>{"k1"}).custom_meta[0],
            (Value{{"total_lengths", 4}, {"group_id", 7}}));
  // Index 9 was free when saved: the next insert reuses it, as the original.
  EXPECT_EQ(restored.insert("q", 1).global_indexes, original.insert("q", 1).global_indexes);
}

TEST(ControllerCheckpoint, MissingOrCorruptCheckpointChangesNothing) {
  const TempFile good("good");
  Controller source = seqlen_controller();
  populate_and_save(source, good.path());
  const std::string bytes = read_bytes(good.path());

  Controller controller = seqlen_controller();
  put(controller, "live", 4, {"x"}, test::lengths_meta({1, 2, 3, 4}));
  const std::string before = snapshot(controller);

  EXPECT_TRUE(throws_code([&] { controller.load(temp_path("nowhere")); }, ErrorCode::kNotFound, {"nowhere"}));
  const TempFile bad("bad");
  std::string flipped = bytes;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x40);
  struct Damage {
    const char* what;
    std::string content;
    const char* message;
  };
  const std::vector<Damage> damaged = {
      {"empty", "", "bad magic"},
      {"truncated", bytes.substr(0, bytes.size() - 7), "checksum mismatch"},
      {"flipped byte", flipped, "checksum mismatch"},
      {"not a checkpoint", "hello, world; this is not a checkpoint at all", "bad magic"},
  };
  for (const auto& [what, content, message] : damaged) {
    SCOPED_TRACE(what);
    write_bytes(bad.path(), content);
    EXPECT_TRUE(throws_code([&] { controller.load(bad.path()); }, ErrorCode::kInvalidArgument,
                            {"controller checkpoint", bad.path(), message}));
    EXPECT_EQ(snapshot(controller), before);
  }
  // A valid checkpoint of another sampler is refused as well.
  Controller other(ControllerOptions{make_rank_aware_sampler(), false});
  EXPECT_TRUE(
      throws_code([&] { other.load(good.path()); }, ErrorCode::kInvalidArgument, {"seqlen_balanced", "rank_aware"}));
}

// A checkpoint with a valid checksum but crafted to nest 100,000 levels deep
// is refused with an error, not a stack overflow.
TEST(ControllerCheckpoint, DeeplyNestedCheckpointIsRefused) {
  const TempFile checkpoint("deep");
  std::string payload(100000, '\x91');  // fixarray of one element, nested
  payload.push_back('\xc0');
  test::write_checkpoint_payload(checkpoint.path(), payload);
  Controller controller = seqlen_controller();
  put(controller, "live", 2, {"x"}, test::lengths_meta({1, 2}));
  const std::string before = snapshot(controller);
  EXPECT_TRUE(throws_code([&] { controller.load(checkpoint.path()); }, ErrorCode::kInvalidArgument,
                          {checkpoint.path(), "nests deeper"}));
  EXPECT_EQ(snapshot(controller), before);
}

// A crash mid-save leaves only a stale ".tmp" behind; the previous checkpoint
// still loads, and the next save replaces both.
TEST(ControllerCheckpoint, SaveIsAtomic) {
  const TempFile checkpoint("atomic");
  Controller controller = seqlen_controller();
  populate_and_save(controller, checkpoint.path());
  const std::string first = read_bytes(checkpoint.path());
  write_bytes(checkpoint.path() + ".tmp", first.substr(0, first.size() / 3));  // the crashed save

  Controller reader = seqlen_controller();
  reader.load(checkpoint.path());
  EXPECT_EQ(snapshot(reader), snapshot(controller));

  put(controller, "p", 2, {"x"}, test::lengths_meta({1, 1}));
  controller.save(checkpoint.path());
  EXPECT_NE(read_bytes(checkpoint.path()), first);
  EXPECT_NE(::access((checkpoint.path() + ".tmp").c_str(), F_OK), 0) << "the .tmp file must be gone";
  reader.load(checkpoint.path());
  EXPECT_EQ(snapshot(reader), snapshot(controller));
  // A path in no directory is the caller's bad argument, for every checkpoint kind.
  EXPECT_TRUE(throws_code([&] { controller.save(temp_path("no_such_dir") + "/x/ckpt"); }, ErrorCode::kInvalidArgument,
                          {"no_such_dir", "No such file or directory"}));
}

TEST(ControllerCheckpoint, RankAwareReservationsSurvive) {
  const TempFile checkpoint("rank_aware");
  Controller original(ControllerOptions{make_rank_aware_sampler(), false});
  put(original, "p", 6, {"x"});
  const auto first = original.get_meta(fetch_request("p", "t", {"x"}, 2, 1, 0)).global_indexes;
  original.save(checkpoint.path());
  Controller restored(ControllerOptions{make_rank_aware_sampler(), false});
  restored.load(checkpoint.path());
  EXPECT_EQ(restored.get_meta(fetch_request("p", "t", {"x"}, 2, 1, 0)).global_indexes, first);
  EXPECT_EQ(restored.get_meta(fetch_request("p", "t", {"x"}, 2, 0, 0)).global_indexes, (std::vector<int64_t>{2, 3}));
}

}  // namespace
}  // namespace seqflow
