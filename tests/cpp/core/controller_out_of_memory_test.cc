// A controller call that runs out of memory at any of its allocations
// changes nothing: each call below runs with its 1st, 2nd, 3rd, ...
// allocation failing until it completes, and after every failure the
// controller's state (a checkpoint of it) is what it was before the call.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "controller_test_support.h"
#include "failing_allocations.h"
#include "seqflow/controller.h"
#include "seqflow/replay.h"
#include "seqflow/sampler.h"

namespace seqflow {
namespace {

using test::fields_of;
using test::put;
using test::snapshot;

// A partition "p": two keyed samples with tags, two plain produced ones
// (one of them consumed by task "t") and two inserted, not yet produced;
// and a write version drawn for an overwrite of the keyed ones.
struct Filled {
  BatchMeta keyed;
  BatchMeta unproduced;
  uint64_t write_version = 0;
};

Filled fill(Controller& controller) {
  const std::vector<std::string> keys = {"a", "b"};
  const std::vector<Value> tags = {{{"status", "running"}, {"group_id", "g1"}}, {{"status", "pending"}}};
  const BatchMeta keyed = controller.kv_resolve("p", keys, tags);
  controller.mark_produced("p", keyed.global_indexes, keyed.generations, fields_of({"x"}), {});
  put(controller, "p", 2, {"x"}, test::lengths_meta({5, 7}));
  controller.get_meta(test::fetch_request("p", "t", {"x"}, 1));
  const std::vector<std::string> x = {"x"};
  const uint64_t write_version =
      controller.sample_production("p", keyed.global_indexes, keyed.generations, x).write_version;
  return {keyed, controller.insert("p", 2), write_version};
}

// Runs `call` on a controller `setup` prepared, with its n-th allocation
// failing, for n = 1, 2, ... until it allocates fewer times than n; every
// call that raised must have left the `state` as it was (one may also
// survive a failed allocation: amortized_reserve falls back to the exact
// size), and `after` then runs on it. Returns the number of calls that raised.
size_t fail_each_allocation_of(
    const std::function<void(Controller&)>& setup, const std::function<void(Controller&)>& call,
    const std::function<void(Controller&)>& after = [](Controller&) {},
    const std::function<std::string(const Controller&)>& state = snapshot) {
  size_t raised = 0;
  for (size_t nth = 1;; ++nth) {
    Controller controller;
    setup(controller);
    const std::string before = state(controller);
    const auto attempt = test::with_nth_allocation_failing(nth, [&] { call(controller); });
    if (!attempt.fired) return raised;
    if (!attempt.raised) continue;
    ++raised;
    EXPECT_EQ(state(controller), before) << "allocation " << nth << " failed and left a change";
    after(controller);
    if (::testing::Test::HasFailure()) return raised;
  }
}

// fail_each_allocation_of on the controller fill() prepares.
size_t fail_each_allocation(const std::function<void(Controller&, const Filled&)>& call) {
  Filled filled;
  return fail_each_allocation_of([&](Controller& controller) { filled = fill(controller); },
                                 [&](Controller& controller) { call(controller, filled); });
}

TEST(ControllerOutOfMemory, KvResolveOfKnownAndNewKeysChangesNothing) {
  const std::vector<std::string> keys = {"a", "c", "b", "d", "c"};
  const std::vector<Value> tags = {{{"status", "finished"}, {"group_id", "g2"}},
                                   {{"status", "pending"}},
                                   {{"reward", 1.5}},
                                   Value::object(),
                                   {{"group_id", "g3"}}};
  const size_t failures =
      fail_each_allocation([&](Controller& controller, const Filled&) { controller.kv_resolve("p", keys, tags); });
  EXPECT_GT(failures, 10u) << "the call allocates more than that: the sweep did not reach it";
}

TEST(ControllerOutOfMemory, KvResolveIntoANewPartitionChangesNothing) {
  const std::vector<std::string> keys = {"k0", "k1"};
  const std::vector<Value> tags = {{{"status", "pending"}}, {{"group_id", "g"}}};
  EXPECT_GT(
      fail_each_allocation([&](Controller& controller, const Filled&) { controller.kv_resolve("q", keys, tags); }), 5u);
}

TEST(ControllerOutOfMemory, InsertChangesNothing) {
  EXPECT_GT(fail_each_allocation([](Controller& controller, const Filled&) { controller.insert("p", 3); }), 1u);
  EXPECT_GT(fail_each_allocation([](Controller& controller, const Filled&) { controller.insert("new", 3); }), 1u);
}

TEST(ControllerOutOfMemory, MarkProducedChangesNothing) {
  const std::vector<Value> meta = {{{"total_lengths", 3}}, {{"group_id", "g9"}}};
  EXPECT_GT(fail_each_allocation([&](Controller& controller, const Filled& filled) {
              controller.mark_produced("p", filled.unproduced.global_indexes, filled.unproduced.generations,
                                       fields_of({"x", "y"}), meta);
            }),
            1u);
}

TEST(ControllerOutOfMemory, AnOverwritesMarkProducedChangesNothing) {
  const std::vector<Value> tags = {{{"status", "finished"}}, {{"group_id", "g7"}, {"reward", 0.5}}};
  EXPECT_GT(fail_each_allocation([&](Controller& controller, const Filled& filled) {
              controller.mark_produced("p", filled.keyed.global_indexes, filled.keyed.generations,
                                       fields_of({"x", "z"}), tags, filled.write_version);
            }),
            1u);
}

TEST(ControllerOutOfMemory, FetchConsumesNothingItDoesNotReturn) {
  for (const char* task : {"t", "u"}) {
    EXPECT_GT(fail_each_allocation([&](Controller& controller, const Filled&) {
                controller.get_meta(test::fetch_request("p", task, {"x"}, 2));
              }),
              1u)
        << task;
  }
}

// A sampler that books each rank's answer (seqlen-balanced: the global
// batch split over 2 DP ranks) serves the booking again: a fetch that fails
// at any allocation is answered by its retry, and the ranks get every sample
// of the global batch once.
TEST(ControllerOutOfMemory, AFailedFetchOfABookingSamplerIsAnsweredByItsRetry) {
  const auto fetch = [](Controller& controller, int64_t rank) {
    return controller.get_meta(test::fetch_request("p", "t", {"x"}, 4, rank, 0)).global_indexes;
  };
  for (size_t nth = 1;; ++nth) {
    Controller controller(ControllerOptions{make_seqlen_balanced_sampler(1, 2), false});
    put(controller, "p", 8, {"x"}, test::lengths_meta({5, 9, 1, 7, 3, 3, 8, 2}));
    bool fired = false;
    {
      const test::FailNthAllocation failing(nth);
      try {
        fetch(controller, 0);
      } catch (const std::bad_alloc&) {
      }
      fired = failing.fired();
    }
    std::vector<int64_t> served = fetch(controller, 0);
    const std::vector<int64_t> rank1 = fetch(controller, 1);
    EXPECT_EQ(served.size(), 4u) << "allocation " << nth;
    served.insert(served.end(), rank1.begin(), rank1.end());
    std::sort(served.begin(), served.end());
    EXPECT_EQ(std::adjacent_find(served.begin(), served.end()), served.end()) << "allocation " << nth;
    EXPECT_EQ(served.size(), 8u) << "allocation " << nth;
    if (!fired || ::testing::Test::HasFailure()) return;
  }
}

// A leased fetch that fails leases nothing (snapshot: nothing consumed;
// progress: nothing leased); ending leases, acknowledged or released,
// ends none when it fails.
TEST(ControllerOutOfMemory, LeasedFetchesAndTheirEndsChangeNothing) {
  const auto leased = [](Controller& controller) {
    size_t total = 0;
    for (const PartitionProgress& partition : controller.progress()) {
      for (const auto& [task, count] : partition.leased) total += count;
    }
    return total;
  };
  MetaRequest request = test::fetch_request("p", "u", {"x"}, 2);
  request.lease = std::chrono::hours(1);
  EXPECT_GT(fail_each_allocation([&](Controller& controller, const Filled&) {
              try {
                controller.get_meta(request);
              } catch (const std::bad_alloc&) {
                EXPECT_EQ(leased(controller), 0u);
                throw;
              }
            }),
            1u);
  for (const bool release : {false, true}) {
    size_t raised = 0;
    for (size_t nth = 1;; ++nth) {
      Controller controller;
      fill(controller);
      const BatchMeta batch = controller.get_meta(request);
      const std::string before = snapshot(controller);
      bool fired = false;
      {
        const test::FailNthAllocation failing(nth);
        try {
          controller.end_leases("p", "u", batch.global_indexes, batch.generations, release, batch.lease);
        } catch (const std::bad_alloc&) {
          ++raised;
          EXPECT_EQ(snapshot(controller), before) << "allocation " << nth;
          EXPECT_EQ(leased(controller), batch.size()) << "allocation " << nth;
        }
        fired = failing.fired();
      }
      if (!fired || ::testing::Test::HasFailure()) break;
    }
    EXPECT_GT(raised, 0u) << "release " << release;
  }
}

TEST(ControllerOutOfMemory, SetCustomMetaChangesNothing) {
  const std::vector<Value> meta = {{{"status", "finished"}}, {{"group_id", "g4"}, {"total_lengths", 9}}};
  EXPECT_GT(fail_each_allocation([&](Controller& controller, const Filled& filled) {
              controller.set_custom_meta("p", filled.unproduced.global_indexes, filled.unproduced.generations, meta);
            }),
            1u);
}

TEST(ControllerOutOfMemory, ReclaimAndGiveBackChangeNothing) {
  EXPECT_GT(fail_each_allocation([](Controller& controller, const Filled& filled) {
              controller.reclaim_unproduced("p", filled.unproduced.global_indexes, filled.unproduced.generations);
            }),
            0u);
  EXPECT_GT(fail_each_allocation([](Controller& controller, const Filled&) {
              const std::vector<int64_t> all = {0, 1, 2, 3};
              controller.give_back("p", "t", all, {});
            }),
            0u);
}

TEST(ControllerOutOfMemory, ClearsChangeNothing) {
  EXPECT_GT(fail_each_allocation([](Controller& controller, const Filled& filled) {
              controller.clear_samples("p", filled.unproduced.global_indexes, filled.unproduced.generations);
            }),
            0u);
  EXPECT_GT(fail_each_allocation([](Controller& controller, const Filled&) {
              const std::vector<std::string> keys = {"a", "zz"};
              controller.kv_clear("p", keys);
            }),
            0u);
  EXPECT_GT(fail_each_allocation([](Controller& controller, const Filled&) { controller.clear_partition("p"); }), 0u);
}

// The replay tests' partition: longer than a short string, so that a copy
// of its name allocates (and fails in the sweep).
const std::string kReplayPartition = "replay_partition_past_short_strings";

// Finished groups of kReplayPartition in verl's layout, by uid and step: a
// prompt key and two trajectories each.
void finished_groups(Controller& controller, const std::vector<std::pair<std::string, int64_t>>& groups) {
  for (const auto& [uid, step] : groups) {
    controller.kv_resolve(kReplayPartition, std::vector<std::string>{uid, uid + "_0_0", uid + "_1_0"},
                          std::vector<Value>{Value{{"is_prompt", true}, {"status", "finished"}, {"global_steps", step}},
                                             Value{{"reward", 0.0}}, Value{{"reward", 1.0}}});
  }
}

ReplayRequest kept_replay_pass(uint64_t pass_id) {
  ReplayRequest request;
  request.partition_id = kReplayPartition;
  request.global_steps = 3;
  request.batch_size = 2;
  request.pass_id = pass_id;
  request.lease_ms = 60000;
  return request;
}

// A kept replay pass that fails keeps nothing and changes nothing (the stale
// group not evicted), so that its retry, under the same pass id, is a whole
// pass, and the next pass selects the other groups whole.
TEST(ControllerOutOfMemory, AKeptReplayPassChangesNothing) {
  ReplayRequest request = kept_replay_pass(7);
  request.options.max_off_policy_threshold = 2;  // "stale" spans 3 steps
  const size_t raised = fail_each_allocation_of(
      [](Controller& controller) {
        finished_groups(controller, {{"stale", 1}, {"a", 2}, {"b", 3}});
      },
      [&](Controller& controller) { controller.replay_pass(request); },
      [&](Controller& controller) {
        const ReplayPass retry = controller.replay_pass(request);
        EXPECT_TRUE(retry.kept);
        EXPECT_EQ(retry.cursor.evictions.stale, 1);
        EXPECT_EQ(retry.refill, 1);  // async: an evicting pass asks for a prompt in its place
        const ReplayPass selecting = controller.replay_pass(kept_replay_pass(8));
        EXPECT_EQ(selecting.selected_uids, (std::vector<std::string>{"a", "b"}));
        EXPECT_EQ(selecting.keys.size(), 4u) << "the trajectories of both groups";
      });
  EXPECT_GT(raised, 10u) << "the pass allocates more than that: the sweep did not reach it";
}

// An acknowledgement that fails acknowledges nothing: the pass still holds
// its groups (none sampleable again), and the acknowledgement sent again
// clears them. (The state compared is the keys: a snapshot holds the kept
// pass's remaining lease, which time changes.)
TEST(ControllerOutOfMemory, AFailedAcknowledgementLeavesThePassHeld) {
  const size_t raised = fail_each_allocation_of(
      [](Controller& controller) {
        finished_groups(controller, {{"a", 2}, {"b", 3}});
        ASSERT_EQ(controller.replay_pass(kept_replay_pass(7)).selected_uids.size(), 2u);
      },
      [](Controller& controller) { controller.ack_replay_pass(kReplayPartition, 7); },
      [](Controller& controller) {
        ReplayRequest count = kept_replay_pass(0);
        count.step = ReplayStep::kCount;
        count.lease_ms = 0;
        EXPECT_EQ(controller.replay_pass(count).sampleable, 0) << "a held group came back";
        const ReplayAck again = controller.ack_replay_pass(kReplayPartition, 7);
        EXPECT_TRUE(again.acknowledged);
        EXPECT_EQ(again.released.size(), 2u) << "the two prompt keys";
        EXPECT_EQ(test::listed_keys(controller, kReplayPartition),
                  (std::set<std::string>{"a_0_0", "a_1_0", "b_0_0", "b_1_0"}));
      },
      [](const Controller& controller) {
        std::string keys;
        for (const std::string& key : test::listed_keys(controller, kReplayPartition)) keys += key + " ";
        return keys;
      });
  EXPECT_GT(raised, 0u) << "the acknowledgement allocates: the sweep did not reach it";
}

}  // namespace
}  // namespace seqflow
