#include <gtest/gtest.h>

#include <chrono>

#include "seqflow/client.h"
#include "test_support.h"

namespace seqflow::test {
namespace {

using namespace std::chrono_literals;

RemoteOptions options_of(std::string endpoint) {
  RemoteOptions options;
  options.controller_endpoint = std::move(endpoint);
  options.timeout = 200ms;
  return options;
}

// Checked before anything connects: each bad value is named with what it was.
TEST(RemoteClientOptions, BadValuesAreNamed) {
  EXPECT_TRUE(throws_invalid([] { make_remote_client(options_of("")); }, {"controller_endpoint", "empty"}));
  RemoteOptions options = options_of("tcp://127.0.0.1:1");
  options.timeout = 0ms;
  EXPECT_TRUE(throws_invalid([&] { make_remote_client(options); }, {"timeout", "0 ms"}));
  options = options_of("tcp://127.0.0.1:1");
  options.busy_poll = -5us;
  EXPECT_TRUE(throws_invalid([&] { make_remote_client(options); }, {"busy_poll", "-5"}));
  options.busy_poll = 2s;
  EXPECT_TRUE(throws_invalid([&] { make_remote_client(options); }, {"busy_poll", "2000000"}));
  options = options_of("tcp://127.0.0.1:1");
  options.server_public_key = "short";
  EXPECT_TRUE(throws_invalid([&] { make_remote_client(options); }, {"server_public_key"}));
}

}  // namespace
}  // namespace seqflow::test
