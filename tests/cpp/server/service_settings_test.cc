#include <gtest/gtest.h>

#include "server/service_settings.h"
#include "test_support.h"

namespace seqflow::test {
namespace {

server::StorageSettings storage_settings(std::string controller) {
  server::StorageSettings settings;
  settings.controller = std::move(controller);
  return settings;
}

// A storage unit's heartbeat thread connects to the controller: a bad
// endpoint must fail here, on the caller's thread, where it can be reported.
TEST(ServiceSettings, MalformedControllerEndpointIsNamed) {
  EXPECT_TRUE(throws_invalid([] { server::storage_service_options(storage_settings("garbage")); },
                             {"controller", "'garbage'"}));
  EXPECT_TRUE(throws_invalid([] { server::storage_service_options(storage_settings("tcp://127.0.0.1:99999")); },
                             {"controller", "99999", "1..65535"}));
  EXPECT_TRUE(throws_invalid([] { server::storage_service_options(storage_settings("tcp://127.0.0.1")); },
                             {"controller", "'tcp://127.0.0.1'"}));
}

TEST(ServiceSettings, MalformedAdvertisedEndpointIsNamed) {
  server::StorageSettings settings = storage_settings("tcp://127.0.0.1:5555");
  settings.advertise = "nonsense://x";
  EXPECT_TRUE(throws_invalid([&] { server::storage_service_options(settings); }, {"advertise", "'nonsense://x'"}));
}

// Nothing needs to listen yet: units may start before the controller.
TEST(ServiceSettings, EndpointWithoutServiceIsAccepted) {
  const server::StorageServiceOptions options = server::storage_service_options(storage_settings("tcp://127.0.0.1:1"));
  EXPECT_EQ(options.controller_endpoint, "tcp://127.0.0.1:1");
  server::check_endpoint("tcp://[::1]:5555", "endpoint");
  server::check_endpoint("ipc:///tmp/seqflow-nobody-listens", "endpoint");
  server::check_endpoint("tcp://localhost:5555", "endpoint");
}

TEST(ServiceSettings, EndpointErrorNamesTheParameter) {
  EXPECT_TRUE(throws_invalid([] { server::check_endpoint("tcp://127.0.0.1:0", "--controller"); },
                             {"--controller", "'tcp://127.0.0.1:0'"}));
}

}  // namespace
}  // namespace seqflow::test
