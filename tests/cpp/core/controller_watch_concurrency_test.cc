// Controller::watch's wait: a waiting watch returns when another thread
// changes a watched sample, and at its deadline when nothing changes.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "controller_test_support.h"
#include "seqflow/controller.h"
#include "seqflow/watch.h"

namespace seqflow {
namespace {

using namespace std::chrono_literals;

WatchRequest waiting(uint64_t cursor, std::chrono::milliseconds wait, WatchFilter filter = {}) {
  return test::watch_request("p", cursor, wait, std::move(filter));
}

TEST(ControllerWatchWait, AWaitingWatchReturnsWhenATagChanges) {
  Controller controller;
  controller.kv_resolve("p", std::vector<std::string>{"u"}, std::vector<Value>{Value{{"status", "running"}}});
  const uint64_t cursor = controller.watch(waiting(0, 0ms)).cursor;
  // Filtered on status: the insert of another key without one does not end the wait.
  auto watch = std::async(std::launch::async, [&] {
    return controller.watch(waiting(cursor, 60s, WatchFilter{"", "status"}));
  });
  controller.kv_resolve("p", std::vector<std::string>{"u_0"}, std::vector<Value>{Value{{"reward", 1}}});
  const Value finished{{"status", "finished"}};
  controller.kv_resolve("p", std::vector<std::string>{"u"}, std::vector<Value>{finished});
  ASSERT_EQ(watch.wait_for(30s), std::future_status::ready) << "the change did not wake the watch";
  const WatchBatch batch = watch.get();
  ASSERT_EQ(batch.changes.size(), 1u);
  EXPECT_EQ(batch.changes[0].kind, ChangeKind::kTagged);
  EXPECT_EQ(batch.changes[0].key, "u");
  EXPECT_EQ(batch.changes[0].tag, finished);
}

TEST(ControllerWatchWait, AWatchWithNoChangeReturnsEmptyAtItsDeadline) {
  Controller controller;
  const uint64_t cursor = controller.watch(waiting(0, 0ms)).cursor;
  auto watch = std::async(std::launch::async, [&] { return controller.watch(waiting(cursor, 50ms)); });
  ASSERT_EQ(watch.wait_for(30s), std::future_status::ready) << "the watch outlived its deadline";
  const WatchBatch batch = watch.get();
  EXPECT_TRUE(batch.changes.empty());
  EXPECT_FALSE(batch.resync);
  // Nothing was missed: a change after it comes with its cursor.
  const BatchMeta inserted = controller.insert("p", 1);
  const WatchBatch next = controller.watch(waiting(batch.cursor, 0ms));
  ASSERT_EQ(next.changes.size(), 1u);
  EXPECT_EQ(next.changes[0].global_index, inserted.global_indexes[0]);
}

}  // namespace
}  // namespace seqflow
