// Policy versions: the trainer's current one never goes back; each sample
// records the one it was inserted at and the one a put completed it at; a
// checkpoint keeps both, and checkpoints from before them load as 0 / -1.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "controller_test_support.h"
#include "error_matchers.h"
#include "seqflow/controller.h"
#include "seqflow/limits.h"

namespace seqflow {
namespace {

using test::fields_of;
using test::put;
using test::TempFile;
using test::throws_code;
using test::throws_invalid;
using Indexes = std::vector<int64_t>;
using Keys = std::vector<std::string>;
using Versions = std::vector<int64_t>;

constexpr int64_t kUnfinished = PolicyVersions::kUnfinished;

TEST(ControllerPolicyVersions, StartsAtZeroAndNeverGoesBack) {
  Controller controller;
  EXPECT_EQ(controller.policy_version(), 0);
  controller.set_policy_version(3);
  controller.set_policy_version(3);  // a trainer that retries
  EXPECT_EQ(controller.policy_version(), 3);
  EXPECT_TRUE(throws_invalid([&] { controller.set_policy_version(2); }, {"version 2", "policy version 3"}));
  EXPECT_TRUE(throws_invalid([&] { controller.set_policy_version(-1); }, {"version", "got -1"}));
  const std::string too_big = std::to_string(kMaxPolicyVersion + 1);
  EXPECT_TRUE(throws_invalid([&] { controller.set_policy_version(kMaxPolicyVersion + 1); }, {"version", too_big}));
  EXPECT_EQ(controller.policy_version(), 3);
  controller.set_policy_version(kMaxPolicyVersion);
  EXPECT_EQ(controller.policy_version(), kMaxPolicyVersion);
}

TEST(ControllerPolicyVersions, SamplesStartAtInsertAndFinishAtThePutThatCompletesThem) {
  Controller controller;
  controller.set_policy_version(1);
  const Indexes both = controller.insert("p", 2).global_indexes;
  PolicyVersions versions = controller.policy_versions("p", both);
  EXPECT_EQ(versions.start, (Versions{1, 1}));
  EXPECT_EQ(versions.finish, (Versions{kUnfinished, kUnfinished}));

  controller.set_policy_version(2);
  controller.mark_produced("p", Indexes{both[0]}, {}, fields_of({"x", "y"}), {});
  controller.set_policy_version(3);
  // Only x: the partition's table holds y too, so the sample is not complete yet.
  controller.mark_produced("p", Indexes{both[1]}, {}, fields_of({"x"}), {});
  versions = controller.policy_versions("p", both);
  EXPECT_EQ(versions.start, (Versions{1, 1}));
  EXPECT_EQ(versions.finish, (Versions{2, kUnfinished}));

  controller.set_policy_version(4);
  controller.mark_produced("p", Indexes{both[1]}, {}, fields_of({"y"}), {});
  controller.set_policy_version(5);
  controller.mark_produced("p", Indexes{both[0]}, {}, fields_of({"x"}), {});  // a re-put moves its finish
  versions = controller.policy_versions("p", Indexes{both[1], both[0], both[1]});
  EXPECT_EQ(versions.start, (Versions{1, 1, 1}));
  EXPECT_EQ(versions.finish, (Versions{4, 5, 4}));

  // Samples inserted later start later; a reused index starts afresh.
  controller.clear_samples("p", Indexes{both[0]}, {});
  const Indexes later = put(controller, "p", 1, {"x", "y"});
  EXPECT_EQ(later, (Indexes{both[0]}));
  versions = controller.policy_versions("p", later);
  EXPECT_EQ(versions.start, (Versions{5}));
  EXPECT_EQ(versions.finish, (Versions{5}));
}

TEST(ControllerPolicyVersions, AKeyKeepsTheStartOfItsFirstPut) {
  Controller controller;
  controller.set_policy_version(1);
  controller.kv_resolve("p", Keys{"a"}, {});
  controller.set_policy_version(2);
  const BatchMeta resolved = controller.kv_resolve("p", Keys{"a", "b"}, {});
  controller.mark_produced("p", resolved.global_indexes, {}, fields_of({"x"}), {});
  PolicyVersions versions = controller.kv_policy_versions("p", Keys{"b", "a"});
  EXPECT_EQ(versions.start, (Versions{2, 1}));
  EXPECT_EQ(versions.finish, (Versions{2, 2}));
  versions = controller.policy_versions("p", resolved.global_indexes);
  EXPECT_EQ(versions.start, (Versions{1, 2}));
}

TEST(ControllerPolicyVersions, UnknownSamplesKeysAndPartitionsAreNamed) {
  Controller controller;
  controller.kv_resolve("p", Keys{"a"}, {});
  controller.insert("q", 1);  // global index 1
  EXPECT_TRUE(throws_code(
      [&] {
        controller.policy_versions("p", Indexes{0, 1});
      },
      ErrorCode::kNotFound, {"global index 1", "partition 'p'"}));
  EXPECT_TRUE(
      throws_code([&] { controller.policy_versions("p", Indexes{-4}); }, ErrorCode::kNotFound, {"global index -4"}));
  EXPECT_TRUE(throws_code(
      [&] {
        controller.kv_policy_versions("p", Keys{"a", "zz"});
      },
      ErrorCode::kNotFound, {"'zz'"}));
  EXPECT_TRUE(throws_code([&] { controller.policy_versions("gone", Indexes{0}); }, ErrorCode::kNotFound, {"'gone'"}));
  EXPECT_TRUE(controller.policy_versions("p", Indexes{}).start.empty());
}

TEST(ControllerPolicyVersions, BadPartitionIdsAndKeysAreRefusedByTheNameRule) {
  Controller controller;
  controller.kv_resolve("p", Keys{"a"}, {});
  const std::string not_utf8 = std::string("p") + '\xff';
  EXPECT_TRUE(throws_invalid([&] { controller.policy_versions("", Indexes{0}); }, {"partition_id"}));
  EXPECT_TRUE(throws_invalid([&] { controller.policy_versions(not_utf8, Indexes{0}); }, {"partition_id"}));
  EXPECT_TRUE(throws_invalid([&] { controller.kv_policy_versions(not_utf8, Keys{"a"}); }, {"partition_id"}));
  EXPECT_TRUE(throws_invalid([&] { controller.kv_policy_versions("p", Keys{"a", ""}); }, {"keys[1]"}));
}

// Two samples of "p" (one finished at 2, one unfinished) and a key of "q"
// started at 3, with the current version 4.
void populate_versions(Controller& controller) {
  controller.set_policy_version(1);
  const Indexes inserted = controller.insert("p", 2).global_indexes;
  controller.set_policy_version(2);
  controller.mark_produced("p", Indexes{inserted[0]}, {}, fields_of({"x"}), {});
  controller.set_policy_version(3);
  controller.kv_resolve("q", Keys{"k"}, {});
  controller.set_policy_version(4);
}

TEST(ControllerPolicyVersions, ACheckpointKeepsThemAll) {
  const TempFile checkpoint("policy_versions");
  Controller original;
  populate_versions(original);
  original.save(checkpoint.path());
  Controller restored;
  restored.load(checkpoint.path());
  EXPECT_EQ(restored.policy_version(), 4);
  const PolicyVersions versions = restored.policy_versions("p", Indexes{0, 1});
  EXPECT_EQ(versions.start, (Versions{1, 1}));
  EXPECT_EQ(versions.finish, (Versions{2, kUnfinished}));
  EXPECT_EQ(restored.kv_policy_versions("q", Keys{"k"}).start, (Versions{3}));
  EXPECT_TRUE(throws_invalid([&] { restored.set_policy_version(3); }, {"version 3", "policy version 4"}));
}

TEST(ControllerPolicyVersions, ACheckpointFromBeforeThemLoadsAsZeroAndUnfinished) {
  Controller controller(ControllerOptions{make_seqlen_balanced_sampler(2, 2), false});
  controller.set_policy_version(9);  // replaced by the load
  controller.load(std::string(SEQFLOW_TEST_DATA_DIR) + "/checkpoints/value_model_embedded/controller.ckpt");
  EXPECT_EQ(controller.policy_version(), 0);
  const PolicyVersions versions = controller.policy_versions("train", Indexes{0, 7});
  EXPECT_EQ(versions.start, (Versions{0, 0}));
  EXPECT_EQ(versions.finish, (Versions{kUnfinished, kUnfinished}));
}

TEST(ControllerPolicyVersions, ACheckpointWithVersionsBeyondItsCurrentOneIsRefused) {
  const TempFile checkpoint("policy_versions_bad");
  Controller original;
  populate_versions(original);
  original.save(checkpoint.path());
  const test::Tree saved = test::Tree::read(test::read_checkpoint_payload(checkpoint.path()));

  Controller controller;
  controller.set_policy_version(7);
  test::Tree behind = saved;
  behind["policy_version"] = 2;  // below the samples started at 3
  test::write_checkpoint_payload(checkpoint.path(), behind.bytes());
  EXPECT_TRUE(throws_invalid([&] { controller.load(checkpoint.path()); }, {"policy versions 3", "policy_version 2"}));
  test::Tree negative = saved;
  negative["policy_version"] = -5;
  test::write_checkpoint_payload(checkpoint.path(), negative.bytes());
  EXPECT_TRUE(throws_invalid([&] { controller.load(checkpoint.path()); }, {"version", "got -5"}));
  EXPECT_EQ(controller.policy_version(), 7);  // unchanged by the refused loads
}

}  // namespace
}  // namespace seqflow
