#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "net_test_support.h"

namespace seqflow::net {
namespace {

using namespace test;
using Clock = std::chrono::steady_clock;

TEST(NetConnection, TimesOutWhileTheServiceIsDownAndWorksAfterItRestartsOnTheSamePort) {
  auto service = echo_service();
  const std::string endpoint = service->endpoint();
  zmq::context_t context;
  Connection connection(context, endpoint, timeout_of(5s));
  EXPECT_EQ(strings_of(connection.call("echo", frames_of({"1"}))), std::vector<std::string>{"1"});

  service->stop();
  const auto start = Clock::now();
  EXPECT_TRUE(throws_code([&] { connection.call("echo", frames_of({"2"}), 300ms); }, ErrorCode::kTimeout,
                          {"'echo'", endpoint, "300 ms"}));
  EXPECT_LT(Clock::now() - start, 2s) << "a send to a dead service must not block";

  ServiceOptions options;
  options.bind = endpoint;
  auto restarted = echo_service(options);
  EXPECT_EQ(strings_of(connection.call("echo", frames_of({"3"}))), std::vector<std::string>{"3"});
}

TEST(NetConnection, AStaleReplyIsNotDeliveredToTheNextCall) {
  std::atomic<bool> first{true};
  auto service = echo_service({}, [&](Service& s) {
    s.handle("slow_once", [&](Frames&) {
      if (first.exchange(false)) std::this_thread::sleep_for(400ms);
      return frames_of({"late"});
    });
  });
  zmq::context_t context;
  Connection connection(context, service->endpoint(), timeout_of(5s));
  EXPECT_TRUE(throws_code([&] { connection.call("slow_once", {}, 100ms); }, ErrorCode::kTimeout,
                          {"request 'slow_once' to " + service->endpoint() + " got no reply within 100 ms"}));
  std::this_thread::sleep_for(500ms);  // the late reply now waits in the socket
  EXPECT_EQ(strings_of(connection.call("echo", frames_of({"fresh"}))), std::vector<std::string>{"fresh"});
  EXPECT_EQ(strings_of(connection.call("slow_once", {})), std::vector<std::string>{"late"});
}

TEST(NetConnection, PipelinedRequestsGetTheirOwnReplies) {
  auto service = echo_service({}, [](Service& s) {
    s.handle("slow", [](Frames& args) {
      std::this_thread::sleep_for(200ms);
      return std::move(args);
    });
  });
  zmq::context_t context;
  Connection connection(context, service->endpoint(), timeout_of(5s));
  const auto deadline = Clock::now() + 5s;
  const uint64_t slow = connection.send("slow", frames_of({"slow"}));
  const uint64_t fast = connection.send("echo", frames_of({"fast"}));
  EXPECT_NE(slow, fast);
  // The fast reply comes first and is kept for its own receive().
  EXPECT_EQ(strings_of(connection.receive(slow, deadline)), std::vector<std::string>{"slow"});
  EXPECT_EQ(strings_of(connection.receive(fast, deadline)), std::vector<std::string>{"fast"});
  EXPECT_TRUE(throws_invalid([&] { connection.receive(fast, deadline); }, {"request id", "not awaiting"}));
}

TEST(NetConnection, ArgumentsAreChecked) {
  zmq::context_t context;
  EXPECT_TRUE(throws_invalid([&] { Connection(context, "nonsense://x", ConnectionOptions{}); }, {"'nonsense://x'"}));
  EXPECT_TRUE(throws_invalid([&] { Connection(context, "tcp://127.0.0.1:1", timeout_of(0ms)); }, {"timeout", "0"}));
  Connection connection(context, "tcp://127.0.0.1:1", timeout_of(100ms));
  EXPECT_TRUE(throws_invalid([&] { connection.send(std::string(65, 'x'), {}); }, {"operation name"}));
  EXPECT_TRUE(throws_code([&] { connection.call("ping", {}); }, ErrorCode::kTimeout, {"'ping'", "100 ms"}));
}

// 8 threads x 500 calls through one pool; every reply matches its request.
TEST(NetConnectionPoolConcurrency, EveryReplyMatchesItsRequest) {
  auto service = echo_service();
  auto context = std::make_shared<zmq::context_t>();
  ConnectionPool pool(context, service->endpoint(), timeout_of(20s));
  constexpr int kThreads = 8;
  constexpr int kCalls = 500;
  std::atomic<int> mismatches{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const std::string request = std::to_string(t) + ":" + std::to_string(i);
        try {
          const auto reply = strings_of(pool.call("echo", frames_of({request, "tail"})));
          if (reply != std::vector<std::string>{request, "tail"}) ++mismatches;
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(pool.idle_connections(), 1u);
  EXPECT_LE(pool.idle_connections(), static_cast<size_t>(kThreads));
  EXPECT_NE(service->metrics().render().find("seqflow_requests_total{op=\"echo\"} 4000\n"), std::string::npos);
}

}  // namespace
}  // namespace seqflow::net
