// The controller service's own rules: inserts are capped per request and
// refused once their client's budget ran out, clears wait for the storage
// routing to exist, and a dead storage unit does not stall clears.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "client/remote_control_plane.h"
#include "controller_pool.h"
#include "server/controller_service.h"
#include "server/storage_service.h"
#include "transport/control_protocol.h"
#include "transport/wire_codec.h"
#include "seqflow/client.h"
#include "storage_test_support.h"
#include "wire_test_support.h"

namespace seqflow::test {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<server::StorageService> storage_unit(const server::ControllerService& controller) {
  server::StorageServiceOptions options;
  options.controller_endpoint = controller.endpoint();
  options.heartbeat = 50ms;
  auto unit = std::make_unique<server::StorageService>(options);
  unit->start();
  return unit;
}

Column int64_values(const std::vector<int64_t>& values) {
  std::vector<Bytes> samples;
  for (int64_t v : values) samples.push_back(bytes_of(std::vector<int64_t>{v}));
  return column_of("x", DType::kInt64, {{1}}, samples);
}

TEST(ControllerService, RefusesHugeInsertsAndKeepsServing) {
  server::ControllerService service({});
  service.start();
  RemoteControlPlane control(pool_of(service), 5s);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { control.insert("p", server::kMaxInsertPerRequest + 1); },
                           {"count " + std::to_string(server::kMaxInsertPerRequest + 1), "per insert request"}));
  MetaRequest insert;
  insert.mode = MetaMode::kInsert;
  insert.partition_id = "p";
  insert.batch_size = server::kMaxInsertPerRequest + 1;
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { control.get_meta(insert); },
                           {"batch_size", "per insert request"}));
  EXPECT_TRUE(control.partition_list().empty());
  EXPECT_EQ(control.insert("p", 3).size(), 3u);
}

bool has_partition(const RemoteControlPlane& control, const std::string& partition) {
  const auto list = control.partition_list();
  return std::find(list.begin(), list.end(), partition) != list.end();
}

void raw_insert(transport::ConnectionPool& pool, const Tree& header) { pool.call("insert", message_of(header)); }

TEST(ControllerService, RefusesBadInsertBudgets) {
  server::ControllerService service({});
  service.start();
  auto pool = pool_of(service);
  const std::string too_long = std::to_string(kMaxInsertBudget.count() + 1);
  for (const auto& [budget, shown] :
       std::vector<std::pair<Tree, std::string>>{{Tree(-5), "got -5"},
                                                 {Tree(0), "got 0"},
                                                 {Tree(kMaxInsertBudget.count() + 1), "got " + too_long},
                                                 {Tree("100"), "must be an integer"},
                                                 {Tree(1.5), "must be an integer"}}) {
    EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                             [&] {
                               raw_insert(*pool, Tree{{"partition_id", "p"}, {"count", 2}, {"budget_ms", budget}});
                             },
                             {"insert request field 'budget_ms'", shown}));
  }
  RemoteControlPlane control(pool, 5s);
  EXPECT_TRUE(control.partition_list().empty());
  raw_insert(*pool, Tree{{"partition_id", "p"}, {"count", 2}});  // no budget: a client before budgets
  raw_insert(*pool, Tree{{"partition_id", "p"}, {"count", 2}, {"budget_ms", 5000}});
  EXPECT_EQ(control.insert("p", 2).size(), 2u);  // the client sends its budget
  EXPECT_EQ(control.production_status({}, "p").value().global_indexes.size(), 6u);
}

// A peer's end_leases with other values: a bad lease id or counts are
// refused naming the field; another fetch's lease id, or another task, ends
// nothing; only the holder's own lease ends its samples.
TEST(ControllerService, EndLeasesFromAPeerEndsOnlyTheLeaseItNames) {
  server::ControllerService service({});
  service.start();
  auto pool = pool_of(service);
  RemoteControlPlane plane(pool, 5s);
  const BatchMeta inserted = plane.insert("p", 2);
  plane.mark_produced("p", inserted.global_indexes, inserted.generations, {{"x", FieldSchema{}}}, {});
  MetaRequest leased;
  leased.fields = {"x"};
  leased.batch_size = 2;
  leased.partition_id = "p";
  leased.task_name = "t";
  leased.polling = true;
  leased.lease = 1h;
  const BatchMeta held = plane.get_meta(leased);
  ASSERT_NE(held.lease, 0u);
  const auto end = [&](Tree lease, std::string task, Tree generations) {
    return transport::control::decode_end_leases_reply(
        pool->call("end_leases", message_of(Tree{{"partition_id", "p"},
                                                 {"indexes", Tree::numbers(held.global_indexes)},
                                                 {"generations", std::move(generations)},
                                                 {"task_name", std::move(task)},
                                                 {"release", true},
                                                 {"lease", std::move(lease)}})));
  };
  const Tree generations = Tree::numbers(held.generations);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { end(Tree(-3), "t", generations); },
                           {"end_leases request field 'lease'", "must be positive"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { end(Tree("x"), "t", generations); },
                           {"end_leases request field 'lease'"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] { end(Tree(static_cast<int64_t>(held.lease)), "t", Tree::numbers<uint64_t>({1})); },
                           {"generations"}));
  EXPECT_EQ(end(Tree(static_cast<int64_t>(held.lease + 1)), "t", generations), 0u) << "another fetch's lease";
  EXPECT_EQ(end(Tree(static_cast<int64_t>(held.lease)), "u", generations), 0u) << "another task's";
  EXPECT_EQ(end(Tree(static_cast<int64_t>(held.lease)), "t", generations), 2u);
}

// A clear holds the reuse gate while it drops released data on the storage
// units, here on a dead one for the storage timeout. Inserts queued behind it
// whose clients gave up meanwhile are refused when the gate opens, not run
// late: no samples are left that nobody will produce.
TEST(ControllerService, RefusesAnInsertWhoseBudgetRanOutBehindAClear) {
  server::ControllerServiceOptions options;
  options.storage_timeout = 1500ms;  // how long the clear holds the gate
  server::ControllerService service(options);
  service.start();
  auto unit = storage_unit(service);
  RemoteControlPlane control(pool_of(service), 5s);
  control.storage_units();
  control.insert("old", 2);
  unit->stop();
  std::jthread clear([&] { control.clear_partition("old"); });
  // The clear drops the partition before the data: once it is gone, the
  // clear holds the gate until the drop times out.
  while (has_partition(control, "old")) std::this_thread::sleep_for(5ms);

  // A client that gives up first: the controller must not insert later.
  RemoteControlPlane hasty(pool_of(service), 200ms);
  EXPECT_TRUE(throws_error(ErrorCode::kTimeout, [&] { hasty.insert("new", 3); }, {"'insert'", "no reply"}));
  // A client that waits longer than its budget sees the refusal.
  auto patient = pool_of(service);
  EXPECT_TRUE(
      throws_error(ErrorCode::kTimeout,
                   [&] {
                     raw_insert(*patient, Tree{{"partition_id", "new"}, {"count", 4}, {"budget_ms", 100}});
                   },
                   {"insert of 4 samples into partition 'new' refused", "budget_ms of 100", "nothing was inserted"}));
  clear.join();
  EXPECT_FALSE(has_partition(control, "new"));
  // The gate is open again: an insert in budget goes through.
  EXPECT_EQ(control.insert("new", 1).size(), 1u);
  EXPECT_EQ(control.production_status({}, "new").value().global_indexes.size(), 1u);
}

TEST(ControllerService, ClearsWaitUntilEveryStorageUnitRegistered) {
  server::ControllerServiceOptions options;
  options.storage_units = 2;
  server::ControllerService service(options);
  service.start();
  RemoteControlPlane control(pool_of(service), 5s);
  control.insert("p", 4);
  // No routing yet: refused before anything is released.
  EXPECT_TRUE(throws_error(ErrorCode::kTimeout, [&] { control.clear_partition("p"); }, {"0 of 2"}));
  EXPECT_EQ(control.production_status({}, "p").value().global_indexes.size(), 4u);
  auto first = storage_unit(service);
  auto second = storage_unit(service);
  EXPECT_EQ(control.storage_units().size(), 2u);
  EXPECT_EQ(control.clear_partition("p").size(), 4u);
}

TEST(ControllerService, ADeadStorageUnitDoesNotStallClears) {
  server::ControllerServiceOptions options;
  options.storage_units = 2;
  options.storage_silence_limit = 300ms;
  // A clear that waited storage_timeout for the dead unit would wait past
  // the client's 20 s timeout, which is only the test's deadline.
  options.storage_timeout = 60s;
  server::ControllerService service(options);
  service.start();
  auto first = storage_unit(service);
  auto second = storage_unit(service);
  RemoteOptions remote;
  remote.controller_endpoint = service.endpoint();
  remote.timeout = 20s;
  auto client = make_remote_client(remote);
  client->put_new("p", {int64_values({1, 2, 3, 4})}, {});
  second->stop();
  std::this_thread::sleep_for(600ms);  // past the silence limit: no heartbeat since the stop

  client->clear_partition("p");                     // throws kTimeout if it waited for the dead unit
  EXPECT_EQ(first->storage().stats().samples, 0u);  // the live unit did drop its share
}

}  // namespace
}  // namespace seqflow::test
