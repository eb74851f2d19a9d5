// Fetch leases: a leased fetch's samples stay consumed once acknowledged, and
// come back (once, in arrival order) when released or when the lease expires.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "controller_test_support.h"
#include "core/fetch_leases.h"
#include "error_matchers.h"
#include "seqflow/controller.h"
#include "seqflow/sampler.h"

namespace seqflow::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

MetaRequest leased_fetch(const std::string& partition, int64_t batch_size, std::chrono::milliseconds lease) {
  MetaRequest request = fetch_request(partition, "train", {"x"}, batch_size);
  request.lease = lease;
  return request;
}

// Waits (at most 10 s) until a polling fetch of the task gets samples again.
BatchMeta fetch_when_back(Controller& controller, const std::string& partition, int64_t batch_size) {
  const auto deadline = Clock::now() + 10s;
  for (;;) {
    BatchMeta batch = controller.get_meta(fetch_request(partition, "train", {"x"}, batch_size));
    if (batch.size() > 0 || Clock::now() > deadline) return batch;
    std::this_thread::sleep_for(5ms);
  }
}

TEST(FetchLeasesTest, EndReturnsOnlyWhatTheTaskHolds) {
  core::FetchLeases leases;
  const std::vector<int64_t> indexes{4, 7, 9};
  const std::vector<uint64_t> generations{1, 2, 3};
  const uint64_t id = leases.lease("p", "train", indexes, generations, Clock::now() + 1h);
  EXPECT_NE(id, 0u);
  EXPECT_EQ(leases.leased_samples(), 3u);
  EXPECT_TRUE(leases.holds("p", "train", 7, 2));
  EXPECT_FALSE(leases.holds("p", "train", 7, 3));                                // another generation: another sample
  EXPECT_EQ(leases.end("p", "train", indexes, generations, id + 1).size(), 0u);  // another lease's
  EXPECT_EQ(leases.leased_samples("p", "train"), 3u);
  EXPECT_EQ(leases.leased_samples("p", "other"), 0u);
  // Another task, another generation: not held.
  EXPECT_EQ(leases.end("p", "other", indexes, generations, 0).size(), 0u);
  const std::vector<int64_t> seven{7};
  const std::vector<uint64_t> stale{5};
  EXPECT_EQ(leases.end("p", "train", seven, stale, 0).size(), 0u);
  const auto ended = leases.end("p", "train", seven, {}, id);
  EXPECT_EQ(ended.indexes, seven);
  EXPECT_EQ(ended.generations, std::vector<uint64_t>{2});
  EXPECT_EQ(leases.end("p", "train", seven, {}, 0).size(), 0u);  // once
  EXPECT_EQ(leases.leased_samples(), 2u);
}

TEST(FetchLeasesTest, ExpireReturnsWhatIsStillHeldOldestLeaseFirst) {
  core::FetchLeases leases;
  const auto now = Clock::now();
  leases.lease("p", "train", std::vector<int64_t>{1, 2}, std::vector<uint64_t>{1, 1}, now + 2s);
  leases.lease("q", "train", std::vector<int64_t>{3}, std::vector<uint64_t>{1}, now + 1s);
  leases.lease("p", "train", std::vector<int64_t>{5}, std::vector<uint64_t>{1}, now + 3s);
  EXPECT_EQ(leases.next_expiry(), now + 1s);
  leases.end("p", "train", std::vector<int64_t>{2}, {}, 0);
  EXPECT_FALSE(leases.expire_next(now).has_value());
  const auto first = leases.expire_next(now + 2s);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->partition_id, "q");
  const auto second = leases.expire_next(now + 2s);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->samples.indexes, std::vector<int64_t>{1});  // 2 was ended
  EXPECT_FALSE(leases.expire_next(now + 2s).has_value());
  EXPECT_EQ(leases.next_expiry(), now + 3s);
  leases.forget("p", nullptr);
  EXPECT_EQ(leases.leased_samples(), 0u);
  EXPECT_FALSE(leases.next_expiry().has_value());  // a lease whose samples all went goes too
}

TEST(FetchLeasesTest, LeasingASampleAgainMovesItToTheNewLease) {
  core::FetchLeases leases;
  const auto now = Clock::now();
  leases.lease("p", "train", std::vector<int64_t>{1}, std::vector<uint64_t>{1}, now + 1s);
  leases.lease("p", "train", std::vector<int64_t>{1, 2}, std::vector<uint64_t>{1, 1}, now + 5s);
  EXPECT_EQ(leases.leased_samples(), 2u);
  EXPECT_EQ(leases.next_expiry(), now + 5s);  // the first lease holds nothing any more
  EXPECT_EQ(leases.expire_next(now + 5s)->samples.size(), 2u);
}

TEST(ControllerLeaseTest, AnAcknowledgedBatchIsNeverServedAgain) {
  Controller controller;
  const std::vector<int64_t> indexes = put(controller, "p", 4, {"x"});
  const BatchMeta batch = controller.get_meta(leased_fetch("p", 4, 50ms));
  ASSERT_EQ(batch.global_indexes, indexes);
  EXPECT_EQ(controller.end_leases("p", "train", batch.global_indexes, batch.generations, false, batch.lease), 4u);
  std::this_thread::sleep_for(120ms);  // well past the lease
  EXPECT_EQ(controller.get_meta(fetch_request("p", "train", {"x"}, 1)).size(), 0u);
  EXPECT_EQ(controller.end_leases("p", "train", batch.global_indexes, batch.generations, false, 0), 0u);
}

TEST(ControllerLeaseTest, AnExpiredLeaseServesItsSamplesAgainOnceInArrivalOrder) {
  Controller controller;
  const std::vector<int64_t> indexes = put(controller, "p", 6, {"x"});
  const BatchMeta first = controller.get_meta(leased_fetch("p", 3, 30ms));
  const BatchMeta second = controller.get_meta(fetch_request("p", "train", {"x"}, 1));  // no lease
  ASSERT_EQ(second.global_indexes, std::vector<int64_t>{indexes[3]});
  const BatchMeta again = fetch_when_back(controller, "p", 5);
  // The leased three come back before the two never served, in arrival order.
  EXPECT_EQ(again.global_indexes, (std::vector<int64_t>{indexes[0], indexes[1], indexes[2], indexes[4], indexes[5]}));
  // A late acknowledgement ends nothing: the work may have been served again.
  EXPECT_EQ(controller.end_leases("p", "train", first.global_indexes, first.generations, false, 0), 0u);
  EXPECT_EQ(controller.get_meta(fetch_request("p", "train", {"x"}, 1)).size(), 0u);
}

TEST(ControllerLeaseTest, AReleasedBatchIsServedAgainAtOnce) {
  Controller controller;
  const std::vector<int64_t> indexes = put(controller, "p", 2, {"x"});
  const BatchMeta batch = controller.get_meta(leased_fetch("p", 2, 1h));
  EXPECT_EQ(controller.get_meta(fetch_request("p", "train", {"x"}, 1)).size(), 0u);
  EXPECT_EQ(controller.end_leases("p", "train", batch.global_indexes, batch.generations, true, 0), 2u);
  EXPECT_EQ(controller.get_meta(fetch_request("p", "train", {"x"}, 2)).global_indexes, indexes);
  EXPECT_EQ(controller.end_leases("p", "train", batch.global_indexes, batch.generations, true, 0), 0u);
}

TEST(ControllerLeaseTest, ProgressCountsLeasedSamplesPerTask) {
  Controller controller;
  put(controller, "p", 3, {"x"});
  controller.get_meta(leased_fetch("p", 2, 1h));
  const std::vector<PartitionProgress> progress = controller.progress();
  ASSERT_EQ(progress.size(), 1u);
  EXPECT_EQ(progress[0].consumed.at("train"), 2u);
  EXPECT_EQ(progress[0].leased.at("train"), 2u);
}

TEST(ControllerLeaseTest, ResetAndClearDropLeasesSoThatNothingComesBackTwice) {
  Controller controller;
  const std::vector<int64_t> indexes = put(controller, "p", 2, {"x"});
  controller.get_meta(leased_fetch("p", 2, 30ms));
  controller.reset_consumption("p", nullptr);
  // Fetched again without a lease: the old lease must not give them back.
  EXPECT_EQ(controller.get_meta(fetch_request("p", "train", {"x"}, 2)).global_indexes, indexes);
  std::this_thread::sleep_for(80ms);
  EXPECT_EQ(controller.get_meta(fetch_request("p", "train", {"x"}, 1)).size(), 0u);
  EXPECT_EQ(controller.progress()[0].leased.count("train"), 0u);

  controller.get_meta(leased_fetch("p", 1, 1h));  // nothing left to lease
  const std::vector<int64_t> cleared = put(controller, "q", 2, {"x"});
  controller.get_meta(leased_fetch("q", 2, 1h));
  controller.clear_partition("q");
  EXPECT_EQ(controller.end_leases("q", "train", cleared, {}, true, 0), 0u);  // the clear ended them
  put(controller, "q", 2, {"x"});
  EXPECT_EQ(controller.get_meta(fetch_request("q", "train", {"x"}, 2)).size(), 2u);
}

// A sampler that books answers (other ranks' shares, repeats) would serve
// them again after a lease gave them back: such a fetch is refused, and
// consumes nothing.
TEST(ControllerLeaseTest, ASamplerThatBooksAnswersRefusesLeases) {
  Controller controller(ControllerOptions{make_seqlen_balanced_sampler(1, 2), false});
  put(controller, "p", 8, {"x"}, lengths_meta({5, 9, 1, 7, 3, 3, 8, 2}));
  EXPECT_TRUE(throws_invalid([&] { controller.get_meta(leased_fetch("p", 4, 1h)); },
                             {"lease: sampler", "books answers", "lease=0"}));
  for (const auto& [index, is_consumed] : consumed(controller, "train", "p")) EXPECT_FALSE(is_consumed) << index;
  // Booked by a fetch without a lease, the other rank's share is refused to a leasing fetch too.
  ASSERT_EQ(controller.get_meta(fetch_request("p", "train", {"x"}, 4)).size(), 4u);
  MetaRequest rank1 = leased_fetch("p", 4, 1h);
  rank1.sampling.dp_rank = 1;
  EXPECT_TRUE(throws_invalid([&] { controller.get_meta(rank1); }, {"books answers"}));
}

// A consumer whose lease expired and whose samples another consumer leased
// since ends nothing with its late release or acknowledgement: the lease it
// names (BatchMeta::lease) is no longer theirs.
TEST(ControllerLeaseTest, ALateEndOfAnExpiredLeaseLeavesTheNewHoldersLeaseAlone) {
  Controller controller;
  put(controller, "p", 1, {"x"});
  const BatchMeta first = controller.get_meta(leased_fetch("p", 1, 30ms));
  ASSERT_NE(first.lease, 0u);
  const BatchMeta second = fetch_when_back(controller, "p", 1);  // no lease: served again
  ASSERT_EQ(second.global_indexes, first.global_indexes);
  controller.give_back("p", "train", second.global_indexes, second.generations);
  const BatchMeta third = controller.get_meta(leased_fetch("p", 1, 1h));
  ASSERT_NE(third.lease, first.lease);
  EXPECT_EQ(controller.end_leases("p", "train", first.global_indexes, first.generations, true, first.lease), 0u);
  EXPECT_EQ(controller.get_meta(fetch_request("p", "train", {"x"}, 1)).size(), 0u) << "the stale release gave it back";
  EXPECT_EQ(controller.end_leases("p", "train", third.global_indexes, third.generations, false, third.lease), 1u);
}

TEST(ControllerLeaseTest, ClearedSamplesLeaveNoLease) {
  Controller controller;
  put(controller, "p", 3, {"x"});
  const BatchMeta batch = controller.get_meta(leased_fetch("p", 3, 1h));
  const std::vector<int64_t> two(batch.global_indexes.begin(), batch.global_indexes.begin() + 2);
  controller.clear_samples("p", two, {});
  EXPECT_EQ(controller.progress()[0].leased.at("train"), 1u);
  EXPECT_EQ(controller.end_leases("p", "train", batch.global_indexes, batch.generations, false, batch.lease), 1u);
}

// Unacknowledged work is not done: a checkpoint saves a leased batch
// unconsumed, so the controller that loads it serves it again; an
// acknowledged one stays consumed, and the running controller's leases end.
TEST(ControllerLeaseTest, ACheckpointSavesLeasedSamplesUnconsumed) {
  const TempFile checkpoint("leased");
  Controller controller;
  const std::vector<int64_t> indexes = put(controller, "p", 4, {"x"});
  const BatchMeta acknowledged = controller.get_meta(leased_fetch("p", 2, 1h));
  controller.end_leases("p", "train", acknowledged.global_indexes, acknowledged.generations, false, 0);
  const BatchMeta held = controller.get_meta(leased_fetch("p", 1, 1h));
  controller.save(checkpoint.path());
  EXPECT_EQ(controller.get_meta(fetch_request("p", "train", {"x"}, 1)).global_indexes, std::vector<int64_t>{indexes[3]})
      << "the save changed nothing running";

  Controller restored;
  restored.load(checkpoint.path());
  EXPECT_EQ(restored.get_meta(fetch_request("p", "train", {"x"}, 2)).global_indexes,
            (std::vector<int64_t>{indexes[2], indexes[3]}));
  controller.load(checkpoint.path());
  EXPECT_EQ(controller.end_leases("p", "train", held.global_indexes, held.generations, false, 0), 0u);
  EXPECT_EQ(controller.get_meta(fetch_request("p", "train", {"x"}, 2)).size(), 2u);
}

TEST(ControllerLeaseTest, ABlockedFetchWakesWhenALeaseExpires) {
  Controller controller;
  const std::vector<int64_t> indexes = put(controller, "p", 1, {"x"});
  controller.get_meta(leased_fetch("p", 1, 50ms));
  MetaRequest waiting = fetch_request("p", "train", {"x"}, 1);
  waiting.polling = false;
  waiting.timeout = 10s;
  const auto start = Clock::now();
  const BatchMeta again = controller.get_meta(waiting);  // no other call: the wait itself notices the expiry
  EXPECT_EQ(again.global_indexes, indexes);
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST(ControllerLeaseTest, LeasesAreForFetchesAndBounded) {
  Controller controller;
  MetaRequest insert;
  insert.partition_id = "p";
  insert.mode = MetaMode::kInsert;
  insert.batch_size = 1;
  insert.lease = 1s;
  EXPECT_TRUE(throws_invalid([&] { controller.get_meta(insert); }, {"lease applies to fetch mode only"}));
  EXPECT_TRUE(throws_invalid([&] { controller.get_meta(leased_fetch("p", 1, -1ms)); },
                             {"lease must be 1 to", "(0: no lease)", "-1"}));
  EXPECT_TRUE(throws_invalid([&] { controller.get_meta(leased_fetch("p", 1, kMaxLease + 1ms)); },
                             {"lease must be", "604800001"}));
}

}  // namespace
}  // namespace seqflow::test
