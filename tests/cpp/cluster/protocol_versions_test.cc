// Peers of two seqflow versions fail at once, naming both wire protocol
// versions: a client says hello before anything else, a unit registers with
// its version, and a controller that predates versions is recognised by its
// answer to hello (an unknown operation).
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "error_matchers.h"
#include "remote_cluster.h"
#include "remote_service_test_support.h"
#include "service_test_support.h"
#include "storage_test_support.h"
#include "transport/connection.h"
#include "transport/control_protocol.h"
#include "wire_test_support.h"

namespace seqflow::test {
namespace {

using namespace std::chrono_literals;
namespace control = transport::control;

const std::string kOurs = "wire protocol " + std::to_string(control::kProtocolVersion);

TEST(ProtocolVersions, AClientOfAnotherVersionIsRefusedNamingBoth) {
  LoneController controller;
  const auto hello = [&](int64_t protocol) {
    return control::decode_hello(controller.connection.call("hello", control::encode_hello(protocol)), "hello reply");
  };
  EXPECT_EQ(hello(control::kProtocolVersion), control::kProtocolVersion);
  EXPECT_TRUE(throws_code(
      [&] { hello(control::kProtocolVersion + 1); }, ErrorCode::kInvalidArgument,
      {"this controller", kOurs, "the client speaks wire protocol " + std::to_string(control::kProtocolVersion + 1),
       "one seqflow version"}));
}

TEST(ProtocolVersions, AUnitOfAnotherVersionOrOfNoneIsRefusedNamingBoth) {
  LoneController controller;
  const auto register_unit = [&](std::optional<int64_t> protocol) {
    Tree request{{"endpoint", "tcp://127.0.0.1:2"}, {"instance", 7}, {"admin_token", "a"}};
    if (protocol)
      request = Tree{{"endpoint", "tcp://127.0.0.1:2"}, {"instance", 7}, {"admin_token", "a"}, {"protocol", *protocol}};
    controller.connection.call("register_storage", message_of(request));
  };
  const auto registered = [&] {
    return control::decode_storage_units_reply(
               controller.connection.call("storage_units", control::encode_bare_request()), control::kStorageUnits)
        .units.size();
  };
  EXPECT_TRUE(throws_code([&] { register_unit(std::nullopt); }, ErrorCode::kInvalidArgument,
                          {"the storage unit at tcp://127.0.0.1:2", "predates wire protocol versions", kOurs}));
  EXPECT_TRUE(throws_code([&] { register_unit(99); }, ErrorCode::kInvalidArgument,
                          {"the storage unit at tcp://127.0.0.1:2", "speaks wire protocol 99", kOurs}));
  EXPECT_EQ(registered(), 0u);
  register_unit(control::kProtocolVersion);
  EXPECT_EQ(registered(), 1u);
}

// A service that answers as a controller from before hello did: it
// handles storage_units, and any operation it does not know is kNotFound.
TEST(ProtocolVersions, AControllerThatPredatesVersionsFailsTheClientsConnectClearly) {
  auto older = server::test::echo_service({}, [](server::Service& service) {
    service.handle("storage_units", [](transport::Frames&) {
      return control::encode_storage_units_reply({{}, 1, std::nullopt});
    });
  });
  RemoteOptions options;
  options.controller_endpoint = older->endpoint();
  options.timeout = 5s;
  const std::string controller = "the controller at " + older->endpoint();
  EXPECT_TRUE(throws_code(
      [&] { make_remote_client(options); }, ErrorCode::kInvalidArgument,
      {"this client speaks seqflow's", kOurs, controller, "predates wire protocol versions", "one seqflow version"}));
}

// A service that is no controller (a storage unit, say) answers for itself.
TEST(ProtocolVersions, AServiceThatIsNoControllerSaysSo) {
  auto other = server::test::echo_service();
  RemoteOptions options;
  options.controller_endpoint = other->endpoint();
  options.timeout = 5s;
  EXPECT_TRUE(throws_code([&] { make_remote_client(options); }, ErrorCode::kNotFound,
                          {"unknown operation 'hello'", "this service handles: echo"}));
}

// Wire protocol 1 had no waiting puts' tickets: its decoders reject the
// "full" reply's ticket and its `room` requests lack one, so its peers
// are refused at hello and at registration, not on their first waiting put.
TEST(ProtocolVersions, PeersFromBeforeWaitingPutTicketsAreRefused) {
  constexpr int64_t kBeforeTickets = 1;
  LoneController controller;
  EXPECT_TRUE(throws_code([&] { controller.connection.call("hello", control::encode_hello(kBeforeTickets)); },
                          ErrorCode::kInvalidArgument,
                          {kOurs, "the client speaks wire protocol " + std::to_string(kBeforeTickets)}));
  const Tree registration{
      {"endpoint", "tcp://127.0.0.1:2"}, {"instance", 7}, {"admin_token", "a"}, {"protocol", kBeforeTickets}};
  EXPECT_TRUE(throws_code([&] { controller.connection.call("register_storage", message_of(registration)); },
                          ErrorCode::kInvalidArgument,
                          {"speaks wire protocol " + std::to_string(kBeforeTickets), kOurs}));
}

TEST(ProtocolVersions, PeersOfOneVersionConnect) {
  RemoteCluster cluster(1);
  auto client = cluster.client(5s);
  EXPECT_EQ(client->put_new("p", {int64_column("x", {1, 2})}, {}).size(), 2u);
}

}  // namespace
}  // namespace seqflow::test
