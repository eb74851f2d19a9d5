#include <gtest/gtest.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "service_test_support.h"

namespace seqflow::transport {
namespace {

using namespace seqflow::server::test;
using server::Service;
using server::ServiceOptions;
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

ConnectionOptions busy_poll_of(std::chrono::microseconds busy_poll) {
  ConnectionOptions options = timeout_of(20s);
  options.busy_poll = busy_poll;
  return options;
}

// A service whose "sleep" op answers after the milliseconds it is given.
std::unique_ptr<Service> sleeping_service() {
  return echo_service({}, [](Service& s) {
    s.handle("sleep", [](Frames& args) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(strings_of(args).at(0))));
      return Frames();
    });
  });
}

// The CPU time this thread spends in a call whose reply comes after `sleep`.
std::chrono::milliseconds cpu_of_call(Connection& connection, std::chrono::milliseconds sleep) {
  const auto thread_cpu = [] {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
  };
  const auto start = thread_cpu();
  connection.call("sleep", frames_of({std::to_string(sleep.count())}));
  return std::chrono::duration_cast<std::chrono::milliseconds>(thread_cpu() - start);
}

TEST(NetConnection, BusyPollSpinsOnlyWhileRepliesComeWithinIt) {
  auto service = sleeping_service();
  zmq::context_t context;
  Connection spinning(context, service->endpoint(), busy_poll_of(400ms));
  Connection sleeping(context, service->endpoint(), busy_poll_of(0us));
  EXPECT_GE(cpu_of_call(spinning, 200ms), 50ms) << "a reply within busy_poll is waited for spinning";
  EXPECT_LT(cpu_of_call(sleeping, 200ms), 30ms) << "busy_poll 0 sleeps";
  EXPECT_GE(cpu_of_call(spinning, 600ms), 100ms) << "spins for busy_poll, then sleeps";
  EXPECT_LT(cpu_of_call(spinning, 200ms), 30ms) << "the last reply took longer than busy_poll: no spin";
  EXPECT_GE(cpu_of_call(spinning, 200ms), 50ms) << "the last reply came within busy_poll: spins again";
}

// As many calls waiting as cores: spinning would take the CPU that carries
// the replies, so none spins (beyond the moment before the others wait too).
TEST(NetConnectionConcurrency, NoReceiveSpinsWhileTheProcessWaitsOnACallPerCore) {
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

// The waiting calls of a parent's other threads do not exist in a forked
// child, so they must not keep the child's calls from spinning.
TEST(NetConnection, AForkedChildSpinsWhateverItsParentWaitedOn) {
  auto service = sleeping_service();
  zmq::context_t context;
  const unsigned waiters = busy_poll_spinner_limit();
  std::vector<std::unique_ptr<Connection>> connections;
  for (unsigned w = 0; w < waiters; ++w)
    connections.push_back(std::make_unique<Connection>(context, service->endpoint(), busy_poll_of(0us)));
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < waiters; ++w) {
    threads.emplace_back([&, w] { connections[w]->call("sleep", frames_of({"1500"})); });
  }
  std::this_thread::sleep_for(300ms);  // every waiter is in its receive now
  const pid_t child = ::fork();
  if (child == 0) {
    zmq::context_t own;
    Connection spinning(own, service->endpoint(), busy_poll_of(400ms));
    ::_exit(cpu_of_call(spinning, 200ms) >= 50ms ? 0 : 1);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child did not spin";
  for (auto& thread : threads) thread.join();
}

TEST(NetConnection, BusyPollIsChecked) {
  zmq::context_t context;
  EXPECT_TRUE(throws_invalid([&] { Connection(context, "tcp://127.0.0.1:1", busy_poll_of(-1us)); },
                             {"ConnectionOptions.busy_poll", "between 0 and 1000000 us", "-1"}));
  EXPECT_TRUE(throws_invalid([&] { ConnectionPool(std::make_shared<zmq::context_t>(), "tcp://127.0.0.1:1",
                                                  busy_poll_of(1001ms)); },
                             {"ConnectionOptions.busy_poll", "1001000"}));
  EXPECT_NO_THROW(Connection(context, "tcp://127.0.0.1:1", busy_poll_of(1s)));
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
}  // namespace seqflow::transport
