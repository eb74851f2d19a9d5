// Connections under threads: callers waiting on one call per core do not
// spin, and replies through one pool shared by many threads each reach the
// call that made the request.
#include <gtest/gtest.h>

#include <algorithm>
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

// As many calls waiting as cores: spinning would take the CPU that carries
// the replies, so none spins (beyond the moment before the others wait too).
TEST(ConnectionConcurrency, NoReceiveSpinsWhileTheProcessWaitsOnACallPerCore) {
  auto service = sleeping_service();
  zmq::context_t context;
  const unsigned callers = busy_poll_spinner_limit() + 1;
  std::vector<std::unique_ptr<Connection>> connections;
  for (unsigned c = 0; c < callers; ++c)
    connections.push_back(std::make_unique<Connection>(context, service->endpoint(), busy_poll_of(1s)));
  std::vector<std::chrono::milliseconds> cpu(callers);
  std::atomic<unsigned> ready{0};
  std::vector<std::thread> threads;
  for (unsigned c = 0; c < callers; ++c) {
    threads.emplace_back([&, c] {
      ++ready;
      while (ready < callers) std::this_thread::yield();
      cpu[c] = cpu_of_call(*connections[c], 500ms);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_LT(*std::max_element(cpu.begin(), cpu.end()), 150ms) << "a caller spun while every core had a waiting call";
  // Alone again, a caller spins.
  EXPECT_GE(cpu_of_call(*connections[0], 200ms), 50ms);
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
