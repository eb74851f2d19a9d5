// Client::replay_pass embedded and over the wire (real controller and
// storage services on loopback): the same passes, the released groups'
// data dropped from storage, the cursor carried across calls, bad options
// refused by name; a kept pass (pass_id) answered again, its prompt's data
// dropped when it is acknowledged, a watcher told when its lease ends;
// reissue_inflight_prompts re-tagging the prompts in flight and dropping
// their trajectories' data.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "client_test_support.h"
#include "error_matchers.h"
#include "remote_cluster.h"
#include "seqflow/client.h"
#include "seqflow/replay.h"
#include "seqflow/watch.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

class ReplayPassModes : public ClientModes {};

INSTANTIATE_TEST_SUITE_P(Modes, ReplayPassModes, ::testing::Values(Mode{"Embedded", 0}, Mode{"RemoteTwoUnits", 2}),
                         mode_name);

// A prompt key and two trajectories holding data and a "reward" tag.
void group(Client& client, const std::string& uid, const char* status, int64_t step, double first, double second) {
  client.kv_put("train", std::vector<std::string>{uid},
                std::vector<Value>{Value{{"is_prompt", true}, {"status", status}, {"global_steps", step}}}, {});
  client.kv_put("train", std::vector<std::string>{uid + "_0_0", uid + "_1_0"},
                std::vector<Value>{Value{{"reward", first}}, Value{{"reward", second}}},
                {int64_column("tokens", {step, step})});
}

ReplayRequest async_request(int64_t global_steps, int64_t batch_size) {
  ReplayRequest request;
  request.partition_id = "train";
  request.global_steps = global_steps;
  request.batch_size = batch_size;
  request.options.max_off_policy_threshold = 2;
  request.options.group_filter_tag = "reward";
  return request;
}

TEST_P(ReplayPassModes, EvictsAndDropsTheDataThenSelectsWithTheCursorCarried) {
  auto client = make_client();
  group(*client, "stale", "finished", 1, 0.0, 1.0);
  group(*client, "same", "finished", 5, 1.0, 1.0);
  group(*client, "kept", "finished", 5, 0.0, 1.0);
  ASSERT_EQ(client->storage_stats().samples, 6u);  // trajectories hold data; prompt keys do not

  ReplayRequest request = async_request(5, 1);
  const ReplayPass evicted = client->replay_pass(request);
  EXPECT_EQ(evicted.refill, 2);
  EXPECT_EQ(evicted.cursor.evictions.stale, 1);
  EXPECT_EQ(evicted.cursor.evictions.filtered_values, (std::vector<std::pair<double, int64_t>>{{1.0, 1}}));
  EXPECT_EQ(client->storage_stats().samples, 2u);  // the evicted groups' data went with their keys

  request.cursor = evicted.cursor;
  const ReplayPass selected = client->replay_pass(request);
  ASSERT_TRUE(selected.ready);
  EXPECT_EQ(selected.selected_uids, std::vector<std::string>{"kept"});
  EXPECT_EQ(selected.keys, (std::vector<std::string>{"kept_0_0", "kept_1_0"}));
  EXPECT_EQ(selected.tags[1], (Value{{"reward", 1.0}}));
  EXPECT_EQ(selected.cursor.evictions.metrics("training"), evicted.cursor.evictions.metrics("training"));
  EXPECT_EQ(client->storage_stats().samples, 2u);  // the selected trajectories stay to be read
}

TEST_P(ReplayPassModes, SuppliedGroupValuesAreAskedForOnceThenFilteredAsVerlDoes) {
  auto client = make_client();
  group(*client, "same", "finished", 5, 0.0, 1.0);  // the tags' rewards are not what the filter reads here
  group(*client, "kept", "finished", 5, 1.0, 1.0);
  ReplayRequest request = async_request(5, 1);
  request.options.group_filter_tag.reset();
  request.options.group_filter_metric = "reward";

  const ReplayPass asked = client->replay_pass(request);
  std::vector<std::string> unclassified = asked.unclassified_keys;
  std::sort(unclassified.begin(), unclassified.end());
  EXPECT_EQ(unclassified, (std::vector<std::string>{"kept_0_0", "kept_1_0", "same_0_0", "same_1_0"}));
  EXPECT_EQ(asked.refill, 0);
  EXPECT_FALSE(asked.ready);
  EXPECT_EQ(client->storage_stats().samples, 4u);  // nothing evicted before the values come

  request.group_values = {{"same", {0.5, 0.5}}, {"kept", {0.25, 0.75}}};
  const ReplayPass filtered = client->replay_pass(request);
  EXPECT_TRUE(filtered.unclassified_keys.empty());
  EXPECT_EQ(filtered.refill, 1);
  EXPECT_EQ(filtered.cursor.evictions.filtered_values, (std::vector<std::pair<double, int64_t>>{{0.5, 1}}));
  EXPECT_EQ(client->storage_stats().samples, 2u);

  request.group_values.clear();
  request.cursor = filtered.cursor;
  const ReplayPass selected = client->replay_pass(request);  // "kept" stays classified: no values asked again
  EXPECT_TRUE(selected.unclassified_keys.empty());
  ASSERT_TRUE(selected.ready);
  EXPECT_EQ(selected.selected_uids, std::vector<std::string>{"kept"});
}

// The request's max_staleness_versions and the cursor's version evictions
// cross the wire; the evicted group's data is dropped.
TEST_P(ReplayPassModes, StaleGroupsByPolicyVersionAreDroppedWithTheirDataAndCounted) {
  auto client = make_client();
  group(*client, "stale", "finished", 5, 0.0, 1.0);  // starts at policy version 0
  const int64_t max_staleness = 1;
  const int64_t current = max_staleness + 1;
  client->control().set_policy_version(current);
  group(*client, "fresh", "finished", 5, 0.0, 1.0);
  ReplayRequest request = async_request(5, 1);
  request.options.max_off_policy_threshold.reset();
  request.options.max_staleness_versions = max_staleness;
  const ReplayPass evicted = client->replay_pass(request);
  EXPECT_EQ(evicted.refill, 1);
  EXPECT_EQ(evicted.cursor.evictions.stale_versions, 1);
  EXPECT_EQ(evicted.cursor.evictions.stale_versions_age_max, current);
  EXPECT_EQ(client->storage_stats().samples, 2u);  // only fresh's trajectories hold data now
  request.cursor = evicted.cursor;
  const ReplayPass selected = client->replay_pass(request);
  EXPECT_EQ(selected.selected_uids, std::vector<std::string>{"fresh"});
  EXPECT_EQ(selected.cursor.evictions.stale_versions, 1);
  request.options.max_staleness_versions = -1;
  EXPECT_TRUE(throws_invalid([&] { client->replay_pass(request); }, {"max_staleness_versions = -1"}));
}

TEST_P(ReplayPassModes, AnIdlePassWaitsBrieflyAndBadOptionsAreRefusedByName) {
  auto client = make_client();
  group(*client, "busy", "running", 5, 0.0, 1.0);
  ReplayRequest request = async_request(5, 1);
  request.wait_ms = 20;
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(client->replay_pass(request).ready);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(20));
  request.options.gen_batch_size = 0;
  EXPECT_TRUE(throws_invalid([&] { client->replay_pass(request); }, {"gen_batch_size = 0"}));
}

TEST_P(ReplayPassModes, AKeptPassIsAnsweredAgainAndItsAcknowledgementDropsThePromptData) {
  auto client = make_client();
  group(*client, "done", "finished", 5, 0.0, 1.0);
  client->kv_put("train", std::vector<std::string>{"done"}, {}, {int64_column("prompt", {5})});
  ASSERT_EQ(client->storage_stats().samples, 3u);
  ReplayRequest request = async_request(5, 1);
  request.pass_id = 41;
  request.lease_ms = 60000;
  const ReplayPass first = client->replay_pass(request);
  ASSERT_TRUE(first.kept);
  EXPECT_EQ(first.selected_uids, std::vector<std::string>{"done"});
  EXPECT_EQ(client->storage_stats().samples, 3u);  // held: the prompt's data stays until acknowledged
  const ReplayPass again = client->replay_pass(request);
  EXPECT_EQ(again.keys, first.keys);
  EXPECT_EQ(again.tags, first.tags);
  EXPECT_TRUE(client->ack_replay_pass("train", 41));
  EXPECT_EQ(client->storage_stats().samples, 2u);
  EXPECT_TRUE(client->ack_replay_pass("train", 41));
  EXPECT_FALSE(client->ack_replay_pass("train", 42));
}

// Remote: the service's lease expiry thread ends the lease; embedded: the watch itself. No other call comes in.
TEST_P(ReplayPassModes, AWatcherIsToldWhenAnUnacknowledgedKeptPassGivesItsGroupBack) {
  auto client = make_client();
  group(*client, "done", "finished", 5, 0.0, 1.0);
  WatchRequest watch;
  watch.partition_id = "train";
  watch.cursor = client->control().watch(watch).cursor;
  ReplayRequest request = async_request(5, 1);
  request.pass_id = 43;
  request.lease_ms = 200;
  ASSERT_TRUE(client->replay_pass(request).kept);
  watch.wait = std::chrono::seconds(5);
  std::vector<Change> changes;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (changes.empty() && std::chrono::steady_clock::now() < deadline) {
    const WatchBatch batch = client->control().watch(watch);
    changes = batch.changes;
    watch.cursor = batch.cursor;
  }
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, ChangeKind::kTagged);
  EXPECT_EQ(changes[0].key, "done");
}

TEST_P(ReplayPassModes, ReissuingDropsTheInFlightTrajectoriesDataAndAnswersThePromptKeys) {
  auto client = make_client();
  group(*client, "late", "running", 4, 0.0, 1.0);
  group(*client, "done", "finished", 4, 0.0, 1.0);
  ASSERT_EQ(client->storage_stats().samples, 4u);
  const ReissuedPrompts reissued = client->reissue_inflight_prompts("train", 7, false);
  EXPECT_EQ(reissued.keys, std::vector<std::string>{"late"});
  EXPECT_EQ(reissued.cleared_trajectories, 2);
  EXPECT_EQ(client->storage_stats().samples, 2u);  // "done"'s trajectories only
  const std::string partition = "train";
  for (const PartitionKeys& listed : client->control().kv_list(&partition)) {
    for (size_t i = 0; i < listed.size(); ++i) {
      if (listed.key(i) == "late") {
        EXPECT_EQ(listed.tag(i), (Value{{"is_prompt", true}, {"status", "pending"}, {"global_steps", 7}}));
      }
    }
  }
  EXPECT_TRUE(client->reissue_inflight_prompts("elsewhere", 7, false).keys.empty());
  EXPECT_TRUE(throws_invalid([&] { client->reissue_inflight_prompts("", 7, false); }, {"partition_id"}));
}

TEST_P(ReplayPassModes, ReissuingWithMemberStatusDropsTheDataOfGroupsWhoseMembersStillRan) {
  auto client = make_client();
  group(*client, "partial", "finished", 4, 0.0, 1.0);
  group(*client, "done", "finished", 4, 0.0, 1.0);
  client->kv_put("train", std::vector<std::string>{"partial_1_0"}, std::vector<Value>{Value{{"status", "running"}}},
                 {});
  ASSERT_EQ(client->storage_stats().samples, 4u);
  EXPECT_TRUE(client->reissue_inflight_prompts("train", 7, false).keys.empty());  // verl's layout: both finished
  const ReissuedPrompts reissued = client->reissue_inflight_prompts("train", 7, true);
  EXPECT_EQ(reissued.keys, std::vector<std::string>{"partial"});
  EXPECT_EQ(reissued.cleared_trajectories, 2);
  EXPECT_EQ(client->storage_stats().samples, 2u);  // "done"'s trajectories only
}

TEST_P(ReplayPassModes, AServedGroupsAbortedMemberIsReleasedAndCountedInTheCursor) {
  auto client = make_client();
  group(*client, "a", "finished", 1, 0.0, 1.0);
  client->kv_put("train", std::vector<std::string>{"a_1_0"}, std::vector<Value>{Value{{"status", "aborted"}}}, {});
  ReplayRequest request;
  request.partition_id = "train";
  request.global_steps = 1;
  request.batch_size = 1;
  request.options.member_status = true;
  const ReplayPass pass = client->replay_pass(request);
  EXPECT_EQ(pass.keys, std::vector<std::string>{"a_0_0"});
  EXPECT_EQ(pass.cursor.evictions.left_out_members, 1);
  EXPECT_EQ(client->storage_stats().samples, 1u);  // the aborted member's data went with it
}

}  // namespace
}  // namespace seqflow::test
