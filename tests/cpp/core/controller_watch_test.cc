// Controller::watch without waiting: what a watched partition's log
// records, its bound and resync, the filter, the cursor's checks.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "controller_test_support.h"
#include "core/change_log.h"
#include "core/partition_state.h"
#include "error_matchers.h"
#include "seqflow/controller.h"
#include "seqflow/limits.h"
#include "seqflow/watch.h"

namespace seqflow::test {
namespace {

WatchRequest watching(const std::string& partition, uint64_t cursor = 0, WatchFilter filter = {}) {
  WatchRequest request = watch_request(partition, cursor, std::chrono::milliseconds(0), std::move(filter));
  request.max_changes = kMaxWatchChanges;
  return request;
}

uint64_t start(Controller& controller, const std::string& partition) {
  const WatchBatch started = controller.watch(watching(partition));
  EXPECT_TRUE(started.changes.empty());
  EXPECT_FALSE(started.resync);
  return started.cursor;
}

std::vector<ChangeKind> kinds(const WatchBatch& batch) {
  std::vector<ChangeKind> out;
  for (const Change& change : batch.changes) out.push_back(change.kind);
  return out;
}

std::vector<int64_t> indexes(const WatchBatch& batch) {
  std::vector<int64_t> out;
  for (const Change& change : batch.changes) out.push_back(change.global_index);
  return out;
}

TEST(ControllerWatch, ChangesSinceTheCursorComeOldestFirstWithKeysAndNewTags) {
  Controller controller;
  const uint64_t cursor = start(controller, "p");
  const std::vector<std::string> keys = {"a", "b"};
  const Value running{{"status", "running"}};
  const BatchMeta made = controller.kv_resolve("p", keys, std::vector<Value>{running, Value()});
  const Value finished{{"status", "finished"}};
  controller.kv_resolve("p", std::vector<std::string>{"a"}, std::vector<Value>{finished});
  controller.mark_produced("p", made.global_indexes, made.generations, fields_of({"x"}), {});
  controller.kv_clear("p", std::vector<std::string>{"b"});

  const WatchBatch batch = controller.watch(watching("p", cursor));
  EXPECT_FALSE(batch.resync);
  EXPECT_EQ(kinds(batch),
            (std::vector<ChangeKind>{ChangeKind::kInserted, ChangeKind::kInserted, ChangeKind::kTagged,
                                     ChangeKind::kProduced, ChangeKind::kProduced, ChangeKind::kCleared}));
  const int64_t a = made.global_indexes[0], b = made.global_indexes[1];
  EXPECT_EQ(indexes(batch), (std::vector<int64_t>{a, b, a, a, b, b}));
  EXPECT_EQ(batch.changes[0].key, "a");
  EXPECT_EQ(batch.changes[0].tag, running);
  EXPECT_EQ(batch.changes[2].tag, finished);
  EXPECT_EQ(batch.changes[3].tag, std::nullopt) << "a put without custom_meta sets no tag";
  EXPECT_EQ(batch.changes[5].key, "b");
  // Read once: the answer's cursor starts after them.
  EXPECT_TRUE(controller.watch(watching("p", batch.cursor)).changes.empty());
}

TEST(ControllerWatch, InsertsSetCustomMetaAndClearsOfKeylessSamplesAreChangesToo) {
  Controller controller;
  const uint64_t cursor = start(controller, "p");
  const BatchMeta inserted = controller.insert("p", 2);
  const std::vector<int64_t> first = {inserted.global_indexes[0]};
  const std::vector<uint64_t> generation = {inserted.generations[0]};
  const Value tag{{"status", "finished"}};
  controller.set_custom_meta("p", first, generation, std::vector<Value>{tag});
  controller.clear_samples("p", first, generation);
  controller.clear_partition("p");

  const WatchBatch batch = controller.watch(watching("p", cursor));
  EXPECT_EQ(kinds(batch), (std::vector<ChangeKind>{ChangeKind::kInserted, ChangeKind::kInserted, ChangeKind::kTagged,
                                                   ChangeKind::kCleared, ChangeKind::kPartitionCleared}));
  EXPECT_EQ(indexes(batch), (std::vector<int64_t>{first[0], inserted.global_indexes[1], first[0], first[0], -1}));
  EXPECT_EQ(batch.changes[0].key, std::nullopt);
  EXPECT_EQ(batch.changes[2].tag, tag);
}

TEST(ControllerWatch, AnUnwatchedPartitionRecordsNothing) {
  Controller controller;
  start(controller, "watched");
  // The log of the watched partition holds only its own changes: a flood
  // elsewhere does not push them out.
  const uint64_t cursor = controller.watch(watching("watched")).cursor;
  controller.insert("watched", 1);
  controller.insert("other", static_cast<int64_t>(kWatchLogCapacity) + 1);
  const WatchBatch batch = controller.watch(watching("watched", cursor));
  EXPECT_FALSE(batch.resync);
  EXPECT_EQ(batch.changes.size(), 1u);

  // And the logs describe nothing for a partition nobody watches.
  core::ChangeLogs logs;
  core::PartitionState partition("p", 0);
  const auto now = core::ChangeLogs::Clock::now();
  EXPECT_FALSE(logs.watched("p", now));
  EXPECT_TRUE(logs.describe("p", partition, ChangeKind::kCleared, {}, false, now).empty());
}

TEST(ControllerWatch, AWatcherFallenOutOfTheBoundedLogIsToldToResync) {
  Controller controller;
  const uint64_t cursor = start(controller, "p");
  controller.insert("p", static_cast<int64_t>(kWatchLogCapacity) + 1);
  const WatchBatch behind = controller.watch(watching("p", cursor));
  EXPECT_TRUE(behind.resync);
  EXPECT_EQ(kinds(behind), std::vector<ChangeKind>{ChangeKind::kResync});
  // From the cursor it gave, the watch goes on.
  const BatchMeta next = controller.insert("p", 1);
  const WatchBatch after = controller.watch(watching("p", behind.cursor));
  EXPECT_FALSE(after.resync);
  EXPECT_EQ(indexes(after), next.global_indexes);
  // A watcher exactly at the log's oldest entry is not behind.
  const uint64_t full = after.cursor;
  controller.insert("p", static_cast<int64_t>(kWatchLogCapacity));
  const WatchBatch whole = controller.watch(watching("p", full));
  EXPECT_FALSE(whole.resync);
  EXPECT_EQ(whole.changes.size(), kWatchLogCapacity);
}

TEST(ControllerWatch, ALogKeepsAtMostItsBytesOfTagsAndFewerChanges) {
  Controller controller;
  const uint64_t cursor = start(controller, "p");
  const std::string big(256 * 1024, 'x');
  const size_t tagged = kWatchLogBytes / big.size() + 8;  // more than the log keeps of such tags
  std::vector<std::string> keys;
  for (size_t i = 0; i < tagged; ++i) keys.push_back("k" + std::to_string(i));
  for (const std::string& key : keys) {
    controller.kv_resolve("p", std::vector<std::string>{key}, std::vector<Value>{Value{{"blob", big}}});
  }
  EXPECT_TRUE(controller.watch(watching("p", cursor)).resync);  // the oldest went: that watcher resyncs
  const WatchBatch kept = controller.watch(watching("p", cursor + tagged - 8));
  EXPECT_FALSE(kept.resync);
  EXPECT_EQ(kept.changes.size(), 8u);
}

TEST(ControllerWatch, WatchesOfMadeUpPartitionsStopAtTheLimitNamingIt) {
  Controller controller;
  for (size_t i = 0; i < kMaxWatchedPartitions; ++i) start(controller, "made_up_" + std::to_string(i));
  EXPECT_TRUE(throws_invalid([&] { controller.watch(watching("one_more")); },
                             {"partition_id 'one_more'", "at most " + std::to_string(kMaxWatchedPartitions)}));
  EXPECT_EQ(controller.watch(watching("made_up_0")).changes.size(), 0u);  // the watched ones go on
}

TEST(ControllerWatch, TheFilterKeepsKeysWithThePrefixAndTagsWithTheField) {
  Controller controller;
  const uint64_t by_prefix = start(controller, "p");
  const uint64_t by_field = controller.watch(watching("p")).cursor;
  controller.kv_resolve("p", std::vector<std::string>{"u1", "u1_0", "u2"},
                        std::vector<Value>{Value{{"status", "running"}}, Value{{"reward", 1}}, Value()});
  controller.kv_resolve("p", std::vector<std::string>{"u2"}, std::vector<Value>{Value{{"status", "finished"}}});
  controller.insert("p", 1);  // keyless: no key, no tag
  controller.clear_partition("p");

  const WatchBatch prefixed = controller.watch(watching("p", by_prefix, WatchFilter{"u1", ""}));
  EXPECT_EQ(kinds(prefixed),
            (std::vector<ChangeKind>{ChangeKind::kInserted, ChangeKind::kInserted, ChangeKind::kPartitionCleared}));
  EXPECT_EQ(prefixed.changes[1].key, "u1_0");
  const WatchBatch with_status = controller.watch(watching("p", by_field, WatchFilter{"", "status"}));
  EXPECT_EQ(kinds(with_status),
            (std::vector<ChangeKind>{ChangeKind::kInserted, ChangeKind::kTagged, ChangeKind::kPartitionCleared}));
  EXPECT_EQ(with_status.changes[0].key, "u1");
  EXPECT_EQ(with_status.changes[1].key, "u2");
}

TEST(ControllerWatch, MaxChangesSplitsTheChangesAcrossCallsWithoutLosingOne) {
  Controller controller;
  uint64_t cursor = start(controller, "p");
  const BatchMeta inserted = controller.insert("p", 5);
  std::vector<int64_t> seen;
  std::vector<size_t> sizes;
  for (int call = 0; call < 3; ++call) {
    WatchRequest request = watching("p", cursor);
    request.max_changes = 2;
    const WatchBatch batch = controller.watch(request);
    sizes.push_back(batch.changes.size());
    for (int64_t index : indexes(batch)) seen.push_back(index);
    cursor = batch.cursor;
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1}));
  EXPECT_EQ(seen, inserted.global_indexes);
}

TEST(ControllerWatch, ACheckpointLoadTellsWatchersToResync) {
  Controller controller;
  controller.insert("p", 1);
  const TempFile file("watch_checkpoint");
  controller.save(file.path());
  const uint64_t cursor = start(controller, "p");
  controller.load(file.path());
  const WatchBatch batch = controller.watch(watching("p", cursor));
  EXPECT_TRUE(batch.resync);
}

TEST(ControllerWatch, BadArgumentsAreRefusedNamingThem) {
  Controller controller;
  WatchRequest request = watching("p");
  request.max_changes = 0;
  EXPECT_TRUE(throws_invalid([&] { controller.watch(request); }, {"max_changes = 0"}));
  request.max_changes = kMaxWatchChanges + 1;
  EXPECT_TRUE(
      throws_invalid([&] { controller.watch(request); }, {"max_changes", std::to_string(kMaxWatchChanges + 1)}));
  request = watching("");
  EXPECT_TRUE(throws_invalid([&] { controller.watch(request); }, {"partition_id"}));
  request = watching("p", 0, WatchFilter{std::string("a\0b", 3), ""});
  EXPECT_TRUE(throws_invalid([&] { controller.watch(request); }, {"key_prefix"}));
  request = watching("p", 0, WatchFilter{"", std::string(kMaxNameBytes + 1, 'f')});
  EXPECT_TRUE(throws_invalid([&] { controller.watch(request); }, {"tag_field"}));
  request = watching("p");
  request.wait = kMaxWatchWait + std::chrono::milliseconds(1);
  EXPECT_TRUE(throws_invalid([&] { controller.watch(request); }, {"wait"}));
  const uint64_t cursor = start(controller, "p");
  EXPECT_TRUE(throws_invalid([&] { controller.watch(watching("p", cursor + 1000)); },
                             {"cursor = " + std::to_string(cursor + 1000), "never handed out"}));
}

}  // namespace
}  // namespace seqflow::test
