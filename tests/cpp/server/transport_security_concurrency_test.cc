// CURVE under concurrent callers: a ConnectionPool's connections, used from
// several threads, each see a refused key as kPermissionDenied at once (each
// has its own socket monitor), while a listed key's pool is served beside
// them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "service_test_support.h"
#include "transport/connection.h"
#include "transport/security.h"

namespace seqflow::transport {
namespace {

using namespace seqflow::server::test;
using namespace std::chrono_literals;
using server::ServiceOptions;

ConnectionOptions curve_client(const CurveKeyPair& keys, const std::string& server_key) {
  ConnectionOptions options = timeout_of(20s);
  options.security = {true, keys, server_key};
  return options;
}

TEST(CurveConcurrency, RefusedAndListedKeysFromManyThreadsGetTheirAnswers) {
  const CurveKeyPair server_keys = generate_curve_keys();
  const CurveKeyPair listed = generate_curve_keys();
  ServiceOptions options;
  options.security = {true, server_keys, {listed.public_key}, {}};
  auto service = echo_service(options);
  const std::string endpoint = service->endpoint();
  auto context = std::make_shared<zmq::context_t>();
  ConnectionPool refused(context, endpoint, curve_client(generate_curve_keys(), server_keys.public_key));
  ConnectionPool admitted(context, endpoint, curve_client(listed, server_keys.public_key));

  constexpr int kThreads = 4;
  constexpr int kCalls = 20;
  std::atomic<int> denied{0};
  std::atomic<int> served{0};
  std::atomic<int> wrong{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kCalls; ++i) {
          try {
            refused.call("echo", frames_of({"x"}));
            ++wrong;
          } catch (const Error& error) {
            ++(error.code() == ErrorCode::kPermissionDenied ? denied : wrong);
          }
          try {
            ++(strings_of(admitted.call("echo", frames_of({"y"}))) == std::vector<std::string>{"y"} ? served : wrong);
          } catch (const Error&) {
            ++wrong;
          }
        }
      });
    }
  }  // joined here, each thread's calls bounded by their 20 s deadlines
  // Every refusal came before its call's deadline, which is only the test's
  // deadline: a refused call that waited for it would end in kTimeout, wrong.
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(denied, kThreads * kCalls);
  EXPECT_EQ(served, kThreads * kCalls);
}

}  // namespace
}  // namespace seqflow::transport
