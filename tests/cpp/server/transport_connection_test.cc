#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
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
  // The call ends at its own 300 ms deadline while the service is down (the
  // error names it). A send that blocked instead would still be waiting when
  // the service is back, after the 20 s cap, and its call would be answered.
  auto while_down = std::async(std::launch::async, [&] {
    return throws_code([&] { connection.call("echo", frames_of({"2"}), 300ms); }, ErrorCode::kTimeout,
                       {"'echo'", endpoint, "300 ms"});
  });
  const bool ended_while_down = while_down.wait_for(20s) == std::future_status::ready;

  ServiceOptions options;
  options.bind = endpoint;
  auto restarted = echo_service(options);
  EXPECT_TRUE(ended_while_down) << "a send to a dead service must not block";
  EXPECT_TRUE(while_down.get());
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

// Replies come at once or after twice busy_poll: a loaded machine that
// delays a thread does not turn one into the other.
TEST(Connection, BusyPollSpinsOnlyWhileRepliesComeWithinIt) {
  auto service = sleeping_service();
  zmq::context_t context;
  Connection spinning(context, service->endpoint(), busy_poll_of(1s));
  Connection sleeping(context, service->endpoint(), busy_poll_of(0us));
  EXPECT_EQ(receive_counts_of_call(spinning, 0ms), (ReceiveCounts{.spun = 1}))
      << "a reply within busy_poll is waited for spinning";
  EXPECT_EQ(receive_counts_of_call(sleeping, 0ms), (ReceiveCounts{.slept = 1})) << "busy_poll 0 sleeps";
  EXPECT_EQ(receive_counts_of_call(spinning, 2s), (ReceiveCounts{.spun = 1, .slept = 1}))
      << "spins for busy_poll, then sleeps";
  EXPECT_EQ(receive_counts_of_call(spinning, 0ms), (ReceiveCounts{.slept = 1, .spins_skipped_after_a_slow_reply = 1}))
      << "the last reply took longer than busy_poll: no spin";
  EXPECT_EQ(receive_counts_of_call(spinning, 0ms), (ReceiveCounts{.spun = 1}))
      << "the last reply came within busy_poll: spins again";
}

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif

// The waiting calls of a parent's other threads do not exist in a forked
// child, so they must not keep the child's calls from spinning.
TEST(Connection, AForkedChildSpinsWhateverItsParentWaitedOn) {
  // ThreadSanitizer ends a forked child of a threaded process once it starts
  // a thread (here, the child's ZeroMQ context's): the other runs cover it.
  if (kThreadSanitizer) GTEST_SKIP() << "a forked child cannot start threads under ThreadSanitizer";
  Gate release;
  std::atomic<int> blocked{0};
  auto service = echo_service({}, [&](Service& s) { add_blocking_op(s, release, blocked); });
  zmq::context_t context;
  const unsigned waiters = busy_poll_spinner_limit();
  const auto connections = connections_to(context, *service, waiters, busy_poll_of(0us));
  std::atomic<int> failed_calls{0};
  std::vector<std::thread> threads;
  OpenAndJoin open_and_join{release, threads};
  start_blocked_calls(connections, threads, failed_calls);
  ASSERT_TRUE(receive_counts_reach(connections, &ReceiveCounts::slept, 1)) << "the waiters never waited";
  Connection parent_caller(context, service->endpoint(), busy_poll_of(1s));
  parent_caller.call("echo", {});
  EXPECT_EQ(parent_caller.receive_counts(), (ReceiveCounts{.slept = 1, .spins_withheld_for_other_waiters = 1}))
      << "in the parent, the waiters keep a call from spinning";

  const pid_t child = ::fork();
  if (child == 0) {
    zmq::context_t own;
    Connection child_caller(own, service->endpoint(), busy_poll_of(1s));
    child_caller.call("echo", {});
    const ReceiveCounts counts = child_caller.receive_counts();
    ::_exit(counts.spun == 1 && counts.spins_withheld_for_other_waiters == 0 ? 0 : 1);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child did not spin";
  release.open();
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failed_calls.load(), 0);
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
