// The replay state in the controller checkpoint: a restored controller knows
// the DAPO classification of the finished groups (it does not ask for their
// values again) and passes as the saved one would; its kept passes still
// hold their prompts, an acknowledgement still clears them and a lease that
// ends still gives them back; a checkpoint without replay state has no key
// for it; a bad entry is refused by name.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "controller_test_support.h"
#include "error_matchers.h"
#include "eventually.h"
#include "msgpack_tree.h"
#include "seqflow/controller.h"
#include "seqflow/replay.h"

namespace seqflow {
namespace {

void group(Controller& controller, const std::string& uid, int64_t step) {
  controller.kv_resolve("train", std::vector<std::string>{uid, uid + "_0_0", uid + "_1_0"},
                        std::vector<Value>{Value{{"is_prompt", true}, {"status", "finished"}, {"global_steps", step}},
                                           Value::object(), Value::object()});
}

ReplayRequest dapo_request(ReplayStep step, std::vector<std::pair<std::string, std::vector<double>>> values = {}) {
  ReplayRequest request;
  request.partition_id = "train";
  request.global_steps = 4;
  request.batch_size = 1;
  request.step = step;
  request.options.group_filter_metric = "acc";
  request.group_values = std::move(values);
  return request;
}

// Two finished groups classified by a count pass: "same" filtered (1.0 twice), "mixed" kept.
void classify(Controller& controller) {
  group(controller, "same", 1);
  group(controller, "mixed", 2);
  EXPECT_EQ(controller.replay_pass(dapo_request(ReplayStep::kCount)).unclassified_keys.size(), 4u);
  const ReplayPass counted =
      controller.replay_pass(dapo_request(ReplayStep::kCount, {{"same", {1.0, 1.0}}, {"mixed", {0.0, 1.0}}}));
  EXPECT_TRUE(counted.unclassified_keys.empty());
}

// A load of `good` with the first entry under `key` given `value` as its `member` throws naming `named`.
::testing::AssertionResult refused_load(const std::string& path, const test::Tree& good, const char* key,
                                        const char* member, test::Tree value,
                                        std::initializer_list<std::string_view> named) {
  test::Tree bad = good;
  bad[key][0][member] = std::move(value);
  test::write_checkpoint_payload(path, bad.bytes());
  Controller controller;
  return test::throws_invalid([&] { controller.load(path); }, named);
}

TEST(ReplayCheckpoint, ARestoredControllerKnowsTheClassificationAndPassesAsTheSavedOne) {
  Controller saved;
  classify(saved);
  test::TempFile file("replay");
  saved.save(file.path());
  Controller restored;
  restored.load(file.path());

  EXPECT_TRUE(restored.replay_pass(dapo_request(ReplayStep::kCount)).unclassified_keys.empty());
  const ReplayPass want = saved.replay_pass(dapo_request(ReplayStep::kSample));
  const ReplayPass got = restored.replay_pass(dapo_request(ReplayStep::kSample));
  ASSERT_EQ(want.cursor.evictions.filtered, 1);  // "same", as classified before the save
  EXPECT_EQ(got.selected_uids, want.selected_uids);
  EXPECT_EQ(got.keys, want.keys);
  EXPECT_EQ(got.refill, want.refill);
  EXPECT_EQ(got.cursor.evictions.filtered_values, want.cursor.evictions.filtered_values);
  EXPECT_EQ(got.released, want.released);
}

TEST(ReplayCheckpoint, NoClassificationWritesNoKeyAndALoadForgetsTheRunningOne) {
  Controller plain;
  group(plain, "same", 1);
  test::TempFile file("plain");
  plain.save(file.path());
  EXPECT_FALSE(test::Tree::read(test::read_checkpoint_payload(file.path())).contains("replay_groups"));

  Controller running;
  classify(running);
  running.load(file.path());  // the checkpoint's groups have not been classified
  EXPECT_EQ(running.replay_pass(dapo_request(ReplayStep::kCount)).unclassified_keys,
            (std::vector<std::string>{"same_0_0", "same_1_0"}));
}

TEST(ReplayCheckpoint, ABadEntryIsRefusedByNameAndChangesNothing) {
  Controller saved;
  classify(saved);
  test::TempFile file("replay");
  saved.save(file.path());
  const test::Tree good = test::Tree::read(test::read_checkpoint_payload(file.path()));
  ASSERT_TRUE(good.contains("replay_groups"));
  const auto refused = [&](const char* member, test::Tree value, std::initializer_list<std::string_view> named) {
    return refused_load(file.path(), good, "replay_groups", member, std::move(value), named);
  };
  EXPECT_TRUE(refused("source", "reward", {"source", "'reward'"}));
  EXPECT_TRUE(refused("filtered_values", test::Tree::numbers(std::vector<double>{}), {"filtered_values", "one value"}));
  EXPECT_TRUE(refused("kept", test::Tree::strings({"same"}), {"'same' a second time"}));
  EXPECT_TRUE(refused("partition", "", {"partition"}));
}

// A group cleared after it was classified is not saved, and one a
// checkpoint names but does not hold (or of a partition it lacks) is left
// out on load: the checkpoint still loads.
TEST(ReplayCheckpoint, GroupsClearedBeforeTheSaveAreLeftOutAndTheCheckpointLoads) {
  Controller saved;
  classify(saved);
  const std::string same_keys[] = {"same", "same_0_0", "same_1_0"};
  saved.kv_clear("train", same_keys);
  test::TempFile file("replay");
  saved.save(file.path());
  test::Tree written = test::Tree::read(test::read_checkpoint_payload(file.path()));
  ASSERT_TRUE(written.contains("replay_groups"));
  EXPECT_FALSE(written["replay_groups"][0].contains("filtered") && written["replay_groups"][0]["filtered"].size() > 0)
      << "the cleared group 'same' was saved";
  Controller restored;
  restored.load(file.path());
  EXPECT_TRUE(restored.replay_pass(dapo_request(ReplayStep::kCount)).unclassified_keys.empty());

  test::Tree elsewhere = written;  // written by a build that saved what it no longer held
  elsewhere["replay_groups"][0]["kept"] = test::Tree::strings({"mixed", "gone"});
  test::write_checkpoint_payload(file.path(), elsewhere.bytes());
  Controller loaded;
  loaded.load(file.path());
  EXPECT_TRUE(loaded.replay_pass(dapo_request(ReplayStep::kCount)).unclassified_keys.empty());
  elsewhere["replay_groups"][0]["partition"] = "val";
  test::write_checkpoint_payload(file.path(), elsewhere.bytes());
  Controller without;
  without.load(file.path());
  EXPECT_EQ(without.replay_pass(dapo_request(ReplayStep::kCount)).unclassified_keys.size(), 2u);
}

// A kept pass of one group.
ReplayRequest kept_one(uint64_t pass_id, int64_t lease_ms) {
  ReplayRequest request;
  request.partition_id = "train";
  request.global_steps = 4;
  request.batch_size = 1;
  request.pass_id = pass_id;
  request.lease_ms = lease_ms;
  return request;
}

int64_t sampleable(Controller& controller) {
  ReplayRequest count = kept_one(0, 0);
  count.step = ReplayStep::kCount;
  return controller.replay_pass(count).sampleable;
}

TEST(ReplayCheckpoint, AKeptPassStillHoldsItsPromptAndItsAcknowledgementClearsIt) {
  Controller saved;
  group(saved, "a", 1);
  group(saved, "b", 2);
  group(saved, "c", 3);
  ASSERT_EQ(saved.replay_pass(kept_one(7, test::kMinuteMs)).selected_uids, std::vector<std::string>{"a"});
  ASSERT_EQ(saved.replay_pass(kept_one(9, test::kMinuteMs)).selected_uids, std::vector<std::string>{"b"});
  ASSERT_TRUE(saved.ack_replay_pass("train", 9).acknowledged);
  test::TempFile file("passes");
  saved.save(file.path());
  Controller restored;
  restored.load(file.path());

  EXPECT_EQ(sampleable(restored), 1);  // "c": "a" is held still, "b" cleared
  EXPECT_TRUE(test::throws_invalid([&] { restored.replay_pass(kept_one(7, test::kMinuteMs)); },
                                   {"pass_id = 7", "restored from a checkpoint"}));
  const ReplayAck ack = restored.ack_replay_pass("train", 7);
  EXPECT_TRUE(ack.acknowledged);
  EXPECT_EQ(ack.released.size(), 1u);
  EXPECT_FALSE(test::listed_keys(restored, "train").count("a"));
  const ReplayAck again = restored.ack_replay_pass("train", 9);  // acknowledged before the save: its reply lost
  EXPECT_TRUE(again.acknowledged);
  EXPECT_TRUE(again.released.empty());
  EXPECT_EQ(sampleable(restored), 1);
}

TEST(ReplayCheckpoint, AnUnacknowledgedPassGivesItsGroupsBackWhenItsLeaseEnds) {
  Controller saved;
  group(saved, "a", 1);
  group(saved, "b", 2);
  ASSERT_TRUE(saved.replay_pass(kept_one(7, 300)).kept);
  test::TempFile file("passes");
  saved.save(file.path());
  Controller restored;
  restored.load(file.path());
  EXPECT_TRUE(test::eventually([&] { return sampleable(restored) == 2; }));
  EXPECT_FALSE(restored.ack_replay_pass("train", 7).acknowledged);  // too late: "a" went back
  EXPECT_TRUE(test::listed_keys(restored, "train").count("a"));
}

TEST(ReplayCheckpoint, ABadKeptPassIsRefusedByName) {
  Controller saved;
  group(saved, "a", 1);
  ASSERT_TRUE(saved.replay_pass(kept_one(7, test::kMinuteMs)).kept);
  test::TempFile file("passes");
  saved.save(file.path());
  const test::Tree good = test::Tree::read(test::read_checkpoint_payload(file.path()));
  ASSERT_TRUE(good.contains("replay_passes"));
  const auto refused = [&](const char* member, test::Tree value, std::initializer_list<std::string_view> named) {
    return refused_load(file.path(), good, "replay_passes", member, std::move(value), named);
  };
  EXPECT_TRUE(refused("pass_id", 0, {"replay_passes 0", "pass_id", "positive"}));
  EXPECT_TRUE(refused("remaining_ms", -1, {"remaining_ms", "= -1"}));
  EXPECT_TRUE(refused("remaining_ms", int64_t{2} * 3600 * 1000, {"remaining_ms", "= 7200000"}));
  EXPECT_TRUE(refused("acknowledged", true, {"held_indexes", "acknowledged"}));
  EXPECT_TRUE(
      refused("held_generations", test::Tree::numbers(std::vector<uint64_t>{}), {"held_generations", "one per"}));
  EXPECT_TRUE(refused("step", "peek", {"step", "'peek'"}));
}

// A pass whose held prompts were cleared (the partition too) before the save
// is saved holding nothing, and loads: its acknowledgement releases nothing.
TEST(ReplayCheckpoint, APassWhosePromptsWereClearedBeforeTheSaveLoadsHoldingNothing) {
  Controller saved;
  group(saved, "a", 1);
  group(saved, "b", 2);
  ASSERT_EQ(saved.replay_pass(kept_one(7, test::kMinuteMs)).selected_uids, std::vector<std::string>{"a"});
  saved.clear_partition("train");
  group(saved, "c", 3);  // the partition anew, its indexes perhaps reused
  test::TempFile file("passes");
  saved.save(file.path());
  Controller restored;
  restored.load(file.path());
  EXPECT_EQ(sampleable(restored), 1);  // "c"
  const ReplayAck ack = restored.ack_replay_pass("train", 7);
  EXPECT_TRUE(ack.acknowledged);
  EXPECT_TRUE(ack.released.empty());
  EXPECT_TRUE(test::listed_keys(restored, "train").count("c"));

  ASSERT_TRUE(saved.replay_pass(kept_one(8, test::kMinuteMs)).kept);  // holds "c"
  saved.clear_partition("train");                                     // and no partition is left
  saved.save(file.path());
  Controller emptied;
  emptied.load(file.path());
  EXPECT_TRUE(emptied.ack_replay_pass("train", 8).acknowledged);
}

}  // namespace
}  // namespace seqflow
