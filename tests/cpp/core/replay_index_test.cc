// ReplayIndex: replay passes read an index kept up to date by the
// partition's keyed changes. Each pass must answer as a pass over an index
// built afresh (a controller loaded from the same checkpoint) would, and
// cost the changed keys, not the stored ones.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "controller_test_support.h"
#include "core/scan_counter.h"
#include "seqflow/controller.h"
#include "seqflow/error.h"
#include "seqflow/replay.h"

namespace seqflow {
namespace {

using test::TempFile;

Value prompt_tag(const char* status, int64_t step) {
  return Value{{"is_prompt", true}, {"status", status}, {"global_steps", step}};
}

void put(Controller& controller, const std::string& key, const Value& tag) {
  controller.kv_resolve("train", std::vector<std::string>{key}, std::vector<Value>{tag});
}

// The same pass on the indexed controller and on one loaded from its
// checkpoint (whose index is built by one walk), answered alike.
void expect_same_pass(Controller& indexed, const ReplayRequest& request, const std::string& checkpoint,
                      const std::string& context) {
  indexed.save(checkpoint);
  Controller recomputed;
  recomputed.load(checkpoint);
  SCOPED_TRACE(context);
  // A pass that throws (a finished group without its filter tag, say) throws alike.
  std::string want_error, got_error;
  ReplayPass want, got;
  try {
    want = recomputed.replay_pass(request);
  } catch (const Error& error) {
    want_error = error.what();
  }
  try {
    got = indexed.replay_pass(request);
  } catch (const Error& error) {
    got_error = error.what();
  }
  EXPECT_EQ(got_error, want_error);
  EXPECT_EQ(got.refill, want.refill);
  EXPECT_EQ(got.ready, want.ready);
  EXPECT_EQ(got.sampleable, want.sampleable);
  EXPECT_EQ(got.sampleable_uids, want.sampleable_uids);
  EXPECT_EQ(got.selected_uids, want.selected_uids);
  EXPECT_EQ(got.keys, want.keys);
  EXPECT_EQ(got.tags, want.tags);
  EXPECT_EQ(got.released, want.released);
  EXPECT_EQ(got.cursor.refill_credit, want.cursor.refill_credit);
  EXPECT_EQ(got.cursor.draining, want.cursor.draining);
  EXPECT_EQ(got.cursor.evictions.metrics("training"), want.cursor.evictions.metrics("training"));
}

class RandomReplayChanges {
 public:
  explicit RandomReplayChanges(uint32_t seed) : random_(seed) {}

  // One random change of the partition's keys and tags; what it was.
  std::string change(Controller& controller, const std::string& checkpoint) {
    switch (pick(13)) {
      case 0:
      case 1:
      case 2: {  // a new group: its prompt and some trajectories, in one call or apart
        const std::string uid = "u" + std::to_string(next_uid_++);
        put(controller, uid, prompt_tag(status(), pick(6)));
        for (int s = 0, n = pick(4); s < n; ++s) trajectory(controller, uid);
        return "new group " + uid;
      }
      case 3:
      case 4: {  // a prompt's status and step change
        const std::string uid = some_uid();
        put(controller, uid, prompt_tag(status(), pick(6)));
        return "retag " + uid;
      }
      case 5: {  // a trajectory arrives late (perhaps for a uid without prompt)
        const std::string uid = some_uid();
        trajectory(controller, uid);
        return "trajectory of " + uid;
      }
      case 6: {  // a prompt key stops being one: a trajectory of its own uid now
        const std::string uid = some_uid();
        put(controller, uid, Value{{"is_prompt", false}});
        return "unprompt " + uid;
      }
      case 7: {  // kv_clear of some keys
        const std::vector<std::string> keys = some_keys(controller);
        controller.kv_clear("train", keys);
        return "kv_clear " + std::to_string(keys.size());
      }
      case 8: {  // clear by global index
        const std::vector<std::string> keys = some_keys(controller);
        if (keys.empty()) return "clear none";
        const BatchMeta found = controller.kv_lookup("train", keys);
        controller.clear_samples("train", found.global_indexes, {});
        return "clear " + std::to_string(keys.size());
      }
      case 9:  // samples without keys between the keyed ones
        controller.insert("train", 1 + pick(3));
        return "insert";
      case 10:
        if (pick(4) == 0) {
          controller.clear_partition("train");
          return "clear_partition";
        }
        controller.save(checkpoint);
        controller.load(checkpoint);
        return "load";
      case 12:  // the trainer moves on: groups age by policy version
        controller.set_policy_version(controller.policy_version() + 1);
        return "policy version";
      default: {  // more tag changes than the partition keeps: the index walks again
        const std::string uid = some_uid();
        for (int i = 0; i < 5000; ++i) put(controller, uid + "_burst", Value{{"reward", i % 2}});
        return "burst on " + uid;
      }
    }
  }

  ReplayRequest request() {
    ReplayRequest made;
    made.partition_id = "train";
    made.global_steps = pick(8);
    made.batch_size = 1 + pick(3);
    made.step = static_cast<ReplayStep>(pick(3));
    made.options.mode = pick(2) == 0 ? ReplayMode::kSync : ReplayMode::kAsync;
    if (pick(2) == 0) made.options.max_off_policy_threshold = 1 + pick(4);
    if (made.options.mode == ReplayMode::kAsync && pick(2) == 0) made.options.max_staleness_versions = pick(3);
    made.options.strategy = pick(2) == 0 ? StalenessStrategy::kDrop : StalenessStrategy::kWait;
    if (pick(3) == 0) made.options.group_filter_tag = "reward";
    made.options.evict = pick(4) != 0;
    made.options.refill_failed_groups = pick(2) == 0;
    made.options.max_inflight_prompts = 1 + pick(8);
    if (made.options.mode == ReplayMode::kSync && made.step == ReplayStep::kEvict) made.step = ReplayStep::kSample;
    return made;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(random_); }
  const char* status() {
    static constexpr const char* kStatuses[] = {"pending", "running", "finished", "failure"};
    return kStatuses[pick(4)];
  }
  std::string some_uid() { return "u" + std::to_string(pick(std::max(next_uid_, 1))); }
  void trajectory(Controller& controller, const std::string& uid) {
    put(controller, uid + "_" + std::to_string(pick(4)) + "_" + std::to_string(next_trajectory_++),
        Value{{"reward", static_cast<double>(pick(2))}});
  }
  std::vector<std::string> some_keys(const Controller& controller) {
    const std::set<std::string> listed = test::listed_keys(controller, "train");
    std::vector<std::string> keys;
    for (const std::string& key : listed) {
      if (pick(8) == 0) keys.push_back(key);
    }
    return keys;
  }

  std::mt19937 random_;
  int next_uid_ = 0;
  int next_trajectory_ = 0;
};

TEST(ReplayIndex, PassesMatchAFullRecomputationUnderRandomChanges) {
  TempFile checkpoint("replay_index");
  TempFile own("replay_index_own");
  Controller controller;
  RandomReplayChanges changes(20261206);
  for (int step = 0; step < 300; ++step) {
    const std::string change = changes.change(controller, own.path());
    const ReplayRequest request = changes.request();
    expect_same_pass(controller, request, checkpoint.path(), "step " + std::to_string(step) + ": " + change);
    if (::testing::Test::HasFailure()) return;  // the first difference is the one to read
  }
}

// With 20k stored keys, a pass after one tag changed, and a sampling pass
// with its acknowledgement, visit the changed keys only.
TEST(ReplayIndex, APassCostsTheChangedKeysNotTheStoredOnes) {
  Controller controller;
  std::vector<std::string> keys;
  std::vector<Value> tags;
  constexpr int kGroups = 2000;
  for (int g = 0; g < kGroups; ++g) {
    const std::string uid = "u" + std::to_string(g);
    keys.push_back(uid);
    tags.push_back(prompt_tag(g < 16 ? "finished" : "running", g % 4));
    for (int s = 0; s < 9; ++s) {
      keys.push_back(uid + "_" + std::to_string(s) + "_0");
      tags.push_back(Value{{"reward", s % 2}});
    }
  }
  controller.kv_resolve("train", keys, tags);
  ReplayRequest count;
  count.partition_id = "train";
  count.step = ReplayStep::kCount;
  uint64_t before = detail::replay_index_visits;
  EXPECT_EQ(controller.replay_pass(count).sampleable, 16);
  EXPECT_EQ(detail::replay_index_visits - before, keys.size());  // the first pass walks them all, once

  put(controller, "u20", prompt_tag("finished", 0));
  before = detail::replay_index_visits;
  EXPECT_EQ(controller.replay_pass(count).sampleable, 17);
  EXPECT_EQ(detail::replay_index_visits - before, 1u);

  ReplayRequest sample = count;
  sample.step = ReplayStep::kSample;
  sample.batch_size = 4;
  sample.pass_id = 1;
  sample.lease_ms = 60000;
  const ReplayPass pass = controller.replay_pass(sample);
  ASSERT_EQ(pass.selected_uids.size(), 4u);
  EXPECT_EQ(pass.keys.size(), 4u * 9);
  EXPECT_TRUE(controller.ack_replay_pass("train", 1).acknowledged);
  before = detail::replay_index_visits;
  EXPECT_EQ(controller.replay_pass(count).sampleable, 13);
  EXPECT_EQ(detail::replay_index_visits - before, 4u);  // the acknowledged prompt keys, gone
}

}  // namespace
}  // namespace seqflow
