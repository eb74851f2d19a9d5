// Policy versions through the controller service: the same answers and
// errors as the controller in this process, a peer's bad version or frame
// refused naming it, and the current version on the metrics endpoint.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "both_modes.h"
#include "controller_pool.h"
#include "server/controller_service.h"
#include "seqflow/controller.h"
#include "seqflow/limits.h"
#include "test_support.h"
#include "transport/control_protocol.h"
#include "wire_test_support.h"

namespace seqflow::test {
namespace {

using namespace std::chrono_literals;
using Keys = std::vector<std::string>;
using Indexes = std::vector<int64_t>;
using Versions = std::vector<int64_t>;

TEST(PolicyVersions, SetReadAndQueriedInBothModes) {
  in_both_modes([](ControlPlane& control) {
    EXPECT_EQ(control.policy_version(), 0);
    control.set_policy_version(2);
    const Indexes inserted = control.insert("p", 2).global_indexes;
    control.set_policy_version(5);
    control.mark_produced("p", Indexes{inserted[1]}, {}, {{"x", FieldSchema{DType::kInt64, {1}, false, false}}}, {});
    control.kv_resolve("q", Keys{"k"}, {});
    EXPECT_EQ(control.policy_version(), 5);
    const PolicyVersions versions = control.policy_versions("p", inserted);
    EXPECT_EQ(versions.start, (Versions{2, 2}));
    EXPECT_EQ(versions.finish, (Versions{PolicyVersions::kUnfinished, 5}));
    EXPECT_EQ(control.kv_policy_versions("q", Keys{"k"}).start, (Versions{5}));
    EXPECT_TRUE(throws_code([&] { control.set_policy_version(4); }, ErrorCode::kInvalidArgument,
                            {"version 4", "policy version 5"}));
    EXPECT_TRUE(throws_code(
        [&] {
          control.policy_versions("p", Indexes{inserted[1], 99});
        },
        ErrorCode::kNotFound, {"global index 99"}));
    EXPECT_TRUE(throws_code([&] { control.kv_policy_versions("q", Keys{"nope"}); }, ErrorCode::kNotFound, {"'nope'"}));
    EXPECT_EQ(control.policy_version(), 5);
  });
}

TEST(PolicyVersions, APeersBadVersionOrFrameIsRefusedNamingIt) {
  server::ControllerService service({});
  service.start();
  auto pool = pool_of(service);
  const auto set_raw = [&](const Tree& header) { pool->call("set_policy_version", message_of(header)); };
  const std::string huge = std::to_string(std::numeric_limits<int64_t>::max());
  EXPECT_TRUE(throws_code(
      [&] {
        set_raw(Tree{{"version", std::numeric_limits<int64_t>::max()}});
      },
      ErrorCode::kInvalidArgument, {"version", huge}));
  EXPECT_TRUE(throws_code([&] { set_raw(Tree{{"version", -3}}); }, ErrorCode::kInvalidArgument, {"version", "-3"}));
  EXPECT_TRUE(throws_code(
      [&] {
        set_raw(Tree{{"version", uint64_t{1} << 63}});
      },
      ErrorCode::kInvalidArgument, {"field 'version'", "out of range"}));
  EXPECT_TRUE(throws_code(
      [&] {
        set_raw(Tree{{"version", "7"}});
      },
      ErrorCode::kInvalidArgument, {"field 'version'", "must be an integer"}));
  EXPECT_TRUE(throws_code([&] { set_raw(Tree::map()); }, ErrorCode::kInvalidArgument, {"'version'"}));
  EXPECT_TRUE(throws_code(
      [&] {
        set_raw(Tree{{"version", 1}, {"extra", 1}});
      },
      ErrorCode::kInvalidArgument, {"'extra'"}));
  const auto query_raw = [&](const Tree& header) { pool->call("policy_versions", message_of(header)); };
  EXPECT_TRUE(throws_code(
      [&] {
        query_raw(Tree{{"partition_id", "p"}});
      },
      ErrorCode::kInvalidArgument, {"policy_versions request", "exactly one"}));
  EXPECT_TRUE(throws_code(
      [&] {
        query_raw(Tree{{"partition_id", "p"}, {"global_indexes", Tree::numbers(Indexes{0})}, {"keys", Tree::array()}});
      },
      ErrorCode::kInvalidArgument, {"exactly one"}));

  // None of it changed the version, and the service still answers.
  RemoteControlPlane control(pool, 5s);
  EXPECT_EQ(control.policy_version(), 0);
  control.set_policy_version(kMaxPolicyVersion);
  EXPECT_EQ(control.policy_version(), kMaxPolicyVersion);
}

TEST(PolicyVersions, AControllersReplyWithTheWrongCountsIsRefused) {
  const transport::Frames reply = transport::control::encode_policy_versions_reply({{1, 2}, {3}});
  EXPECT_TRUE(throws_code([&] { transport::control::decode_policy_versions_reply(reply, 2); },
                          ErrorCode::kInvalidArgument, {"policy_versions reply", "2 starts and 1 finishes for 2"}));
}

TEST(PolicyVersions, TheMetricsShowTheCurrentVersion) {
  server::ControllerService service({});
  service.start();
  RemoteControlPlane control(pool_of(service), 5s);
  EXPECT_NE(service.metrics().render().find("seqflow_policy_version 0\n"), std::string::npos);
  control.set_policy_version(12);
  EXPECT_NE(service.metrics().render().find("seqflow_policy_version 12\n"), std::string::npos);
}

}  // namespace
}  // namespace seqflow::test
