// Index generations: a global index handed out again gets a new generation,
// and whatever names samples by a BatchMeta (controller calls, storage reads
// and writes, the client over both) refuses a stale or foreign one with
// kStaleSample, changing nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "controller_test_support.h"
#include "remote_cluster.h"
#include "seqflow/client.h"
#include "seqflow/controller.h"
#include "sample_keys_support.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

std::string text(uint64_t value) { return std::to_string(value); }

const std::string kFieldX[] = {"x"};

TEST(ControllerGenerations, AReusedIndexGetsANewGeneration) {
  Controller controller;
  const BatchMeta first = controller.insert("base", 3);
  ASSERT_EQ(first.generations.size(), 3u);
  controller.clear_partition("base");
  const BatchMeta second = controller.insert("new", 3);
  EXPECT_EQ(second.global_indexes, first.global_indexes);  // smallest released first, as TransferQueue
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NE(second.generations[i], 0u);
    EXPECT_GT(second.generations[i], first.generations[i]);
  }
  // Every BatchMeta of a sample carries its generation.
  MetaRequest everything;
  everything.partition_id = "new";
  everything.mode = MetaMode::kForceFetch;
  EXPECT_EQ(controller.get_meta(everything).generations, second.generations);
}

TEST(ControllerGenerations, StaleGenerationsAreRefusedNamingBothAndChangeNothing) {
  Controller controller;
  const BatchMeta stale = controller.insert("p", 2);
  controller.clear_samples("p", stale.global_indexes, stale.generations);
  const BatchMeta fresh = controller.insert("p", 2);  // same indexes, new generations
  ASSERT_EQ(fresh.global_indexes, stale.global_indexes);
  const std::string before = snapshot(controller);
  const std::string gi = std::to_string(stale.global_indexes[0]);
  const std::vector<std::string> named = {"global index " + gi, "partition 'p'",
                                          "generation " + text(stale.generations[0]) + " in the BatchMeta",
                                          "now holds generation " + text(fresh.generations[0])};
  const std::vector<std::string_view> words(named.begin(), named.end());
  const auto stale_everywhere = std::vector<std::function<void()>>{
      [&] { controller.mark_produced("p", stale.global_indexes, stale.generations, fields_of({"x"}), {}); },
      [&] {
        controller.set_custom_meta("p", stale.global_indexes, stale.generations, lengths_meta({1, 2}));
      },
      [&] { controller.clear_samples("p", stale.global_indexes, stale.generations); },
      [&] { controller.sample_production("p", stale.global_indexes, stale.generations, {}); },
  };
  for (const auto& call : stale_everywhere) {
    EXPECT_TRUE(throws_code(call, ErrorCode::kStaleSample, words));
    EXPECT_EQ(snapshot(controller), before);
  }
  // The live sample's own generations pass.
  controller.mark_produced("p", fresh.global_indexes, fresh.generations, fields_of({"x"}), {});
  EXPECT_EQ(controller.sample_production("p", fresh.global_indexes, fresh.generations, {}).generations,
            fresh.generations);
}

TEST(ControllerGenerations, GoneSamplesAreStaleForWritesAndSkippedByClears) {
  Controller controller;
  const BatchMeta meta = controller.insert("p", 2);
  controller.clear_partition("p");
  EXPECT_TRUE(
      throws_code([&] { controller.mark_produced("p", meta.global_indexes, meta.generations, fields_of({"x"}), {}); },
                  ErrorCode::kStaleSample, {"partition 'p'", "no longer exists"}));
  EXPECT_TRUE(controller.clear_samples("p", meta.global_indexes, meta.generations).empty());  // twice: no error
}

TEST(ControllerGenerations, AMetaWithoutGenerationsIsCheckedByPartitionOnly) {
  Controller controller;
  const BatchMeta a = controller.insert("a", 1);
  controller.insert("b", 1);
  controller.mark_produced("a", a.global_indexes, {}, fields_of({"x"}), {});
  EXPECT_TRUE(throws_code([&] { controller.mark_produced("b", a.global_indexes, {}, fields_of({"x"}), {}); },
                          ErrorCode::kStaleSample, {"partition 'b'", "no longer exists"}));
  EXPECT_TRUE(throws_code(
      [&] {
        controller.mark_produced("a", a.global_indexes, std::vector<uint64_t>{1, 2}, fields_of({"x"}), {});
      },
      ErrorCode::kInvalidArgument, {"generations holds 2 entries for 1 global indexes"}));
}

TEST(ControllerGenerations, CheckpointsKeepGenerationsAndNewOnesCountAbove) {
  const TempFile checkpoint("generations");
  Controller original;
  const BatchMeta kept = original.insert("p", 3);
  original.save(checkpoint.path());
  const BatchMeta after_save = original.insert("p", 2);  // handed out after the save: never again

  Controller restored;
  restored.load(checkpoint.path());
  restored.mark_produced("p", kept.global_indexes, kept.generations, fields_of({"x"}), {});  // still valid
  const BatchMeta fresh = restored.insert("p", 2);
  EXPECT_EQ(fresh.global_indexes, after_save.global_indexes);
  for (size_t i = 0; i < 2; ++i) EXPECT_GT(fresh.generations[i], after_save.generations[i]);
}

TEST(ControllerGenerations, AVersionOneCheckpointLoadsWithNewGenerations) {
  const TempFile checkpoint("version_one");
  Controller original;
  put(original, "p", 2, {"x"});
  original.save(checkpoint.path());
  Tree state = Tree::read(read_checkpoint_payload(checkpoint.path()));
  state["version"] = 1;
  state.erase("next_generation");
  state.erase("incarnation");
  for (Tree& partition : state["partitions"].as_array()) partition.erase("generations");
  write_checkpoint_payload(checkpoint.path(), state.bytes());

  Controller restored;
  restored.load(checkpoint.path());
  MetaRequest everything;
  everything.partition_id = "p";
  everything.mode = MetaMode::kForceFetch;
  const BatchMeta meta = restored.get_meta(everything);
  ASSERT_EQ(meta.generations.size(), 2u);
  EXPECT_NE(meta.generations[0], meta.generations[1]);
  restored.set_custom_meta("p", meta.global_indexes, meta.generations, lengths_meta({1, 2}));
}

TEST(StorageGenerations, AnOlderGenerationCanNeitherReadNorOverwriteANewerOne) {
  StorageUnit unit;
  const std::vector<int64_t> gi = {4};
  unit.put(samples_of(gi, 7), {object_column("x", {"old"}), object_column("y", {"old y"})});
  unit.put(samples_of(gi, 9), {object_column("x", {"new"})});  // the index's next sample
  EXPECT_TRUE(
      throws_error(ErrorCode::kStaleSample, [&] { unit.get(samples_of(gi, 7), kFieldX); },
                   {"global index 4", "partition 'p'", "generation 7 in the BatchMeta", "now holds generation 9"}));
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample,
                           [&] { unit.put(samples_of(gi, 7), {object_column("x", {"late"})}); },
                           {"global index 4", "now holds generation 9"}));
  EXPECT_EQ(text_of(unit.get(samples_of(gi, 9), kFieldX)[0][0]), "new");
  // The new sample does not inherit the old one's other fields.
  const std::string y[] = {"y"};
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { unit.get(samples_of(gi, 9), y); }, {"\"y\""}));
  EXPECT_EQ(unit.stats().bytes, 3u);
}

TEST(StorageGenerations, AnotherPartitionsSampleIsRefusedWithOrWithoutGenerations) {
  StorageUnit unit;
  const std::vector<int64_t> gi = {2};
  unit.put(samples_of(gi, 5, "other"), {object_column("x", {"theirs"})});
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample, [&] { unit.get(samples_of(gi, 5, "base"), kFieldX); },
                           {"partition 'base'", "holds a sample of partition 'other'"}));
  const PartitionIdList base(1, "base");
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample,
                           [&] {
                             unit.get({gi, base, {}}, kFieldX);
                           },
                           {"generation not known", "partition 'other'"}));
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample,
                           [&] { unit.put(samples_of(gi, 5, "base"), {object_column("x", {"mine"})}); },
                           {"partition 'other'"}));
  const PartitionIdList other(1, "other");
  EXPECT_EQ(text_of(unit.get({gi, other, {}}, kFieldX)[0][0]), "theirs");  // by hand: partition checked only
}

TEST(StorageGenerations, CheckpointsKeepEachValuesSample) {
  const TempDir dir;
  const std::string path = dir.file("storage.ckpt");
  StorageUnit unit;
  unit.put(samples_of(std::vector<int64_t>{1}, 11, "a"), {object_column("x", {"one"})});
  unit.save(path);
  StorageUnit loaded;
  loaded.load(path);
  EXPECT_EQ(text_of(loaded.get(samples_of(std::vector<int64_t>{1}, 11, "a"), kFieldX)[0][0]), "one");
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample,
                           [&] { loaded.get(samples_of(std::vector<int64_t>{1}, 12, "a"), kFieldX); },
                           {"now holds generation 11"}));
}

struct Mode {
  const char* name;
  size_t storage_units;  // 0: embedded
};

class ClientGenerations : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    if (GetParam().storage_units == 0) {
      client_ = make_embedded_client(ControllerOptions{}, StorageOptions{});
    } else {
      cluster_ = std::make_unique<RemoteCluster>(GetParam().storage_units);
      client_ = cluster_->client();
    }
  }

  std::unique_ptr<RemoteCluster> cluster_;
  std::shared_ptr<Client> client_;
};

TEST_P(ClientGenerations, AMetaKeptAcrossAClearNeverReadsTheSampleThatReusedItsIndexes) {
  Client& client = *client_;
  const BatchMeta base = client.put_new("base", {int64_column("x", {0, 1, 2, 3})}, {});
  client.clear_partition("base");
  const BatchMeta fresh = client.put_new("new", {int64_column("x", {100, 101, 102, 103})}, {});
  ASSERT_EQ(fresh.global_indexes, base.global_indexes);
  const std::string x[] = {"x"};
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample, [&] { client.get_data(base, x); },
                           {"partition 'base'", "generation " + text(base.generations[0])}));
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample,
                           [&] {
                             client.put_existing(base, {int64_column("y", {5, 6, 7, 8})}, {});
                           },
                           {"partition 'base'"}));
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample,
                           [&] { client.clear_samples("new", base.global_indexes, base.generations); },
                           {"partition 'new'", "now holds generation " + text(fresh.generations[0])}));
  BatchMeta edited = fresh;  // the new samples under another partition's name
  edited.partition_ids = PartitionIdList(fresh.size(), "base");
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample, [&] { client.get_data(edited, x); },
                           {"partition 'base'", "partition 'new'"}));
  EXPECT_EQ(int64_of(client.get_data(fresh, x)[0][0]), 100);  // untouched
}

TEST_P(ClientGenerations, AHandBuiltMetaGetsTheCurrentGenerationsOnPut) {
  Client& client = *client_;
  const BatchMeta inserted = client.control().insert("p", 2);
  BatchMeta by_hand;
  by_hand.global_indexes = inserted.global_indexes;
  by_hand.partition_ids = PartitionIdList(2, "p");
  const BatchMeta put = client.put_existing(by_hand, {int64_column("x", {7, 8})}, {});
  EXPECT_EQ(put.generations, inserted.generations);
  const std::string x[] = {"x"};
  EXPECT_EQ(int64_of(client.get_data(by_hand, x)[1][0]), 8);
}

INSTANTIATE_TEST_SUITE_P(Modes, ClientGenerations,
                         ::testing::Values(Mode{"Embedded", 0}, Mode{"RemoteOneUnit", 1}, Mode{"RemoteThreeUnits", 3}),
                         [](const ::testing::TestParamInfo<Mode>& info) { return std::string(info.param.name); });

TEST(RemoteGenerations, AControllerRestartedWithoutACheckpointNeverServesWhatUnitsHeldBefore) {
  RemoteCluster cluster(2);
  auto client = cluster.client();
  const BatchMeta old = client->put_new("p", {int64_column("x", {1, 2, 3, 4}), int64_column("y", {5, 6, 7, 8})}, {});
  const uint64_t before = cluster.unit(0).incarnation();
  ASSERT_NE(before, 0u);

  cluster.restart_controller("");  // no checkpoint: knows nothing of what the units hold
  auto fresh_client = cluster.client();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((cluster.unit(0).incarnation() == before || cluster.unit(1).incarnation() == before) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(cluster.unit(0).incarnation(), cluster.controller().controller().incarnation());
  EXPECT_EQ(cluster.unit(0).storage().stats().samples + cluster.unit(1).storage().stats().samples, 0u);

  const BatchMeta fresh = fresh_client->put_new("p", {int64_column("x", {10, 20, 30, 40})}, {});
  ASSERT_EQ(fresh.global_indexes, old.global_indexes);
  const std::string x[] = {"x"};
  const std::string y[] = {"y"};
  EXPECT_EQ(int64_of(fresh_client->get_data(fresh, x)[0][0]), 10);
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { fresh_client->get_data(fresh, y); }, {"\"y\""}));
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample, [&] { fresh_client->get_data(old, x); }, {"partition 'p'"}));
}

}  // namespace
}  // namespace seqflow::test
