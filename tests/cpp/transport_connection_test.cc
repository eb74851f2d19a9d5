#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST(Connection, TimesOutWhileTheServiceIsDownAndWorksAfterItRestartsOnTheSamePort) {
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

TEST(Connection, AStaleReplyIsNotDeliveredToTheNextCall) {
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

TEST(Connection, PipelinedRequestsGetTheirOwnReplies) {
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

TEST(Connection, ArgumentsAreChecked) {
  zmq::context_t context;
  EXPECT_TRUE(throws_invalid([&] { Connection(context, "nonsense://x", ConnectionOptions{}); }, {"'nonsense://x'"}));
  EXPECT_TRUE(throws_invalid([&] { Connection(context, "tcp://127.0.0.1:1", timeout_of(0ms)); }, {"timeout", "0"}));
  Connection connection(context, "tcp://127.0.0.1:1", timeout_of(100ms));
  EXPECT_TRUE(throws_invalid([&] { connection.send(std::string(65, 'x'), {}); }, {"operation name"}));
  EXPECT_TRUE(throws_code([&] { connection.call("ping", {}); }, ErrorCode::kTimeout, {"'ping'", "100 ms"}));
}

TEST(Connection, BusyPollSpinsOnlyWhileRepliesComeWithinIt) {
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

// The waiting calls of a parent's other threads do not exist in a forked
// child, so they must not keep the child's calls from spinning.
TEST(Connection, AForkedChildSpinsWhateverItsParentWaitedOn) {
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

TEST(Connection, BusyPollIsChecked) {
  zmq::context_t context;
  EXPECT_TRUE(throws_invalid([&] { Connection(context, "tcp://127.0.0.1:1", busy_poll_of(-1us)); },
                             {"ConnectionOptions.busy_poll", "between 0 and 1000000 us", "-1"}));
  EXPECT_TRUE(throws_invalid(
      [&] { ConnectionPool(std::make_shared<zmq::context_t>(), "tcp://127.0.0.1:1", busy_poll_of(1001ms)); },
      {"ConnectionOptions.busy_poll", "1001000"}));
  EXPECT_NO_THROW(Connection(context, "tcp://127.0.0.1:1", busy_poll_of(1s)));
}

}  // namespace
}  // namespace seqflow::transport
