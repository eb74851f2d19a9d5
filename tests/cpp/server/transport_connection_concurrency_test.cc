// Connections under threads: a caller does not spin while the process
// waits on a call per core, and replies through one pool shared by many
// threads each reach the call that made the request.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "service_test_support.h"

namespace seqflow::transport {
namespace {

using namespace seqflow::server::test;
using server::Service;

// As many calls waiting as cores: spinning would take the CPU that carries
// the replies, so the call that makes them that many does not spin; alone
// again, a caller spins.
TEST(ConnectionConcurrency, NoReceiveSpinsWhileTheProcessWaitsOnACallPerCore) {
  Gate release;
  std::atomic<int> blocked{0};
  auto service = echo_service({}, [&](Service& s) { add_blocking_op(s, release, blocked); });
  zmq::context_t context;
  const unsigned spinners = busy_poll_spinner_limit();
  const auto connections = connections_to(context, *service, spinners, busy_poll_of(1s));
  std::atomic<int> failed_calls{0};
  std::vector<std::thread> threads;
  OpenAndJoin open_and_join{release, threads};
  start_blocked_calls(connections, threads, failed_calls);
  ASSERT_TRUE(receive_counts_reach(connections, &ReceiveCounts::spun, 1))
      << "up to busy_poll_spinner_limit() waiting receives each spin";

  Connection caller(context, service->endpoint(), busy_poll_of(1s));
  caller.call("echo", {});
  EXPECT_EQ(caller.receive_counts(), (ReceiveCounts{.slept = 1, .spins_withheld_for_other_waiters = 1}))
      << "a receive spun while every core had a waiting call";

  release.open();
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failed_calls.load(), 0);
  caller.call("echo", {});
  EXPECT_EQ(caller.receive_counts().spun, 1u) << "alone again, a caller spins";
}

// 8 threads x 500 calls through one pool; every reply matches its request.
TEST(ConnectionPoolConcurrency, EveryReplyMatchesItsRequest) {
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
}  // namespace seqflow::transport
