// when_full = wait over the wire: storage services answer a put that does
// not fit "full" at once (no worker waits) and the remote client retries
// until a clear made room, within its put's budget; what it put reads back once.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client_test_support.h"
#include "controller_test_support.h"
#include "remote_cluster.h"
#include "seqflow/client.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPatience = std::chrono::seconds(30);  // every wait's deadline here

StorageOptions waiting_storage(uint64_t max_samples) {
  return {.max_samples = max_samples, .when_full = WhenFull::kWait};
}

// Waits (deadline kPatience) until the units told puts to wait `answers` times in all.
bool until_told_to_wait(RemoteCluster& cluster, uint64_t answers) {
  const auto deadline = Clock::now() + kPatience;
  for (;;) {
    uint64_t told = 0;
    for (size_t u = 0; u < cluster.unit_count(); ++u) told += cluster.unit(u).storage().capacity_stats().puts_waited;
    if (told >= answers) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// The x of `count` samples a new task fetches, each once; and that no more are ready.
std::set<int64_t> values_in(Client& client, const std::string& partition, const std::string& task, int64_t count) {
  const BatchMeta meta = client.get_meta(fetch_request(partition, task, {"x"}, count));
  const std::string fields[] = {"x"};
  std::set<int64_t> out;
  for (const auto& row : client.get_data(meta, fields)) EXPECT_TRUE(out.insert(int64_of(row[0])).second);
  EXPECT_EQ(client.get_meta(fetch_request(partition, task, {"x"}, 1)).size(), 0u);
  return out;
}

TEST(RemoteCapacity, AWaitingPutLandsOnceAfterAClearMadeRoomOnEveryUnit) {
  RemoteCluster cluster(2, waiting_storage(2));
  auto client = cluster.client(kPatience);
  const BatchMeta first = client->put_new("p", {int64_column("x", {0, 1, 2, 3})}, {});  // two per unit
  auto waiting = std::async(std::launch::async, [&] { return client->put_new("p", {int64_column("x", {4, 5})}, {}); });
  ASSERT_TRUE(until_told_to_wait(cluster, 1));
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  // One sample off each unit (global indexes 0 and 1: gi % 2).
  const std::vector<int64_t> cleared(first.global_indexes.begin(), first.global_indexes.begin() + 2);
  client->clear_samples("p", cleared, {});
  ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(waiting.get().size(), 2u);
  EXPECT_EQ(values_in(*client, "p", "reader", 4), (std::set<int64_t>{2, 3, 4, 5}));
  for (size_t u = 0; u < cluster.unit_count(); ++u) {
    EXPECT_EQ(cluster.unit(u).storage().stats().samples, 2u);
    EXPECT_EQ(cluster.unit(u).storage().capacity_stats().waiting_puts, 0u);  // the client waited, not the unit
  }
}

TEST(RemoteCapacity, AWaitingPutRaisesAtItsBudgetAndLeavesNothing) {
  RemoteCluster cluster(1, waiting_storage(2));
  auto client = cluster.client(std::chrono::milliseconds(400));
  client->put_new("p", {int64_column("x", {0, 1})}, {});
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { client->put_new("p", {int64_column("x", {9})}, {}); },
                           {"storage full: max_samples is 2", "the put waited", "its timeout"}));
  EXPECT_EQ(values_in(*client, "p", "reader", 2), (std::set<int64_t>{0, 1}));
  EXPECT_EQ(cluster.unit(0).storage().stats().samples, 2u);
}

// A put waits without the client's lock: the clear that makes room may come
// from the same client (one client shared by a producer and a consumer thread).
TEST(RemoteCapacity, TheSameClientsClearMakesRoomInEitherMode) {
  RemoteCluster cluster(1, waiting_storage(2));
  StorageOptions embedded_storage = waiting_storage(2);
  embedded_storage.wait_timeout = kPatience;
  for (const auto& client : {cluster.client(kPatience), make_embedded_client({}, embedded_storage)}) {
    const BatchMeta first = client->put_new("p", {int64_column("x", {0, 1})}, {});
    auto waiting = std::async(std::launch::async, [&] { return client->put_new("p", {int64_column("x", {7})}, {}); });
    // A put that did not wait would be done long before this.
    EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
    client->clear_samples("p", std::vector<int64_t>{first.global_indexes[0]}, {});
    ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
    EXPECT_EQ(waiting.get().size(), 1u);
    EXPECT_EQ(values_in(*client, "p", "reader", 2), (std::set<int64_t>{1, 7}));
  }
}

TEST(RemoteCapacity, OtherCallsAreServedWhilePutsWait) {
  RemoteCluster cluster(1, waiting_storage(1));
  auto client = cluster.client(kPatience);
  client->put_new("p", {int64_column("x", {0})}, {});
  // More waiting puts than the unit has workers at least: none holds one.
  constexpr int kWaiting = 8;
  std::vector<std::future<BatchMeta>> waiting;
  std::vector<std::shared_ptr<Client>> producers;
  for (int i = 0; i < kWaiting; ++i) {
    producers.push_back(cluster.client(kPatience));
    waiting.push_back(std::async(std::launch::async, [&producer = *producers.back(), i] {
      return producer.put_new("q", {int64_column("x", {100 + i})}, {});
    }));
  }
  ASSERT_TRUE(until_told_to_wait(cluster, kWaiting));
  EXPECT_EQ(values_in(*client, "p", "reader", 1), (std::set<int64_t>{0}));  // reads go on
  // Each clear makes room for one waiting put; the consumer clears what lands.
  std::set<int64_t> landed;
  const auto deadline = Clock::now() + kPatience;
  client->clear_partition("p");
  while (landed.size() < kWaiting && Clock::now() < deadline) {
    const BatchMeta meta = client->get_meta(fetch_request("q", "consumer", {"x"}, 1));
    if (meta.size() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    const std::string fields[] = {"x"};
    EXPECT_TRUE(landed.insert(int64_of(client->get_data(meta, fields)[0][0])).second);
    client->clear_samples("q", meta.global_indexes, meta.generations);
  }
  for (auto& put : waiting) {
    ASSERT_EQ(put.wait_for(kPatience), std::future_status::ready);
    EXPECT_EQ(put.get().size(), 1u);
  }
  EXPECT_EQ(landed.size(), static_cast<size_t>(kWaiting));
}

}  // namespace
}  // namespace seqflow::test
