// The service's worker pool under concurrent callers: blocked handlers do
// not hold back other requests, inline handlers answer while every worker is
// busy, and max_workers caps the pool.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "service_test_support.h"

namespace seqflow::server {
namespace {

using namespace seqflow::server::test;

// Eight handlers block on a gate; other requests still get workers.
TEST(ServiceConcurrency, BlockedHandlersDoNotHoldBackOthers) {
  Gate release;
  std::atomic<int> blocked{0};
  auto service = echo_service({}, [&](Service& s) { add_blocking_op(s, release, blocked); });
  auto context = std::make_shared<zmq::context_t>();
  ConnectionPool pool(context, service->endpoint(), timeout_of(20s));
  std::vector<std::thread> callers;
  OpenAndJoin cleanup{release, callers};
  std::atomic<int> answered{0};
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&, i] {
      const auto results = strings_of(pool.call("block", frames_of({std::to_string(i)})));
      if (results == std::vector<std::string>{std::to_string(i)}) ++answered;
    });
  }
  ASSERT_TRUE(wait_for_blocked(blocked, 8));
  // Answered while all eight still block (the gate opens only after), each
  // within its 5 s timeout, which is only the test's deadline.
  EXPECT_EQ(strings_of(pool.call("echo", frames_of({"through"}), 5s)), std::vector<std::string>{"through"});
  EXPECT_TRUE(pool.call("ping", {}, 5s).empty());
  release.open();
  for (auto& caller : callers) caller.join();
  EXPECT_EQ(answered.load(), 8);
}

// The only worker is blocked: an inline answer still comes (the I/O thread
// gives it), a declined one waits for the worker and reaches it with its
// arguments untouched (unless its client gave up meanwhile: then it is not
// run), and an inline exception is an error reply.
TEST(ServiceConcurrency, InlineHandlersAnswerWithoutAWorkerOrHandOverUntouched) {
  Gate release;
  std::atomic<int> blocked{0};
  auto service = echo_service(with_workers(1, 1), [&](Service& s) {
    add_blocking_op(s, release, blocked);
    s.handle(
        "quick", [](Frames& args) { return std::move(args); },
        [](const Frames& args) -> std::optional<Frames> {
          const std::string_view first = as_string_view(args.at(0));
          if (first == "bad") throw Error(ErrorCode::kInvalidArgument, "field 'first' is 'bad'");
          if (first != "now") return std::nullopt;
          return frames_of({"inline"});
        });
    s.handle("only_inline", nullptr, [](const Frames& args) -> std::optional<Frames> {
      if (as_string_view(args.at(0)) != "yes") return std::nullopt;
      return frames_of({"inline"});
    });
  });
  auto context = std::make_shared<zmq::context_t>();
  ConnectionPool pool(context, service->endpoint(), timeout_of(20s));
  std::vector<std::thread> callers;
  OpenAndJoin cleanup{release, callers};
  callers.emplace_back([&] { pool.call("block", {}); });
  ASSERT_TRUE(wait_for_blocked(blocked, 1));

  EXPECT_EQ(strings_of(pool.call("quick", frames_of({"now", "x"}), 5s)), std::vector<std::string>{"inline"});
  EXPECT_TRUE(throws_code([&] { pool.call("quick", frames_of({"bad"}), 5s); }, ErrorCode::kInvalidArgument,
                          {"field 'first' is 'bad'"}));
  EXPECT_TRUE(throws_code([&] { pool.call("quick", frames_of({"later"}), 300ms); }, ErrorCode::kTimeout, {"'quick'"}))
      << "a declined request must wait for a worker";
  // The service counts that request's budget from its arrival, a little after
  // the client started counting: let its deadline pass there too.
  std::this_thread::sleep_for(100ms);
  std::vector<std::string> handed_over;
  callers.emplace_back([&] { handed_over = strings_of(pool.call("quick", frames_of({"later", "y", ""}), 10s)); });
  release.open();
  for (auto& caller : callers) caller.join();
  callers.clear();
  EXPECT_EQ(handed_over, (std::vector<std::string>{"later", "y", ""}));
  EXPECT_EQ(strings_of(pool.call("only_inline", frames_of({"yes"}), 5s)), std::vector<std::string>{"inline"});
  EXPECT_TRUE(throws_code([&] { pool.call("only_inline", frames_of({"no"}), 5s); }, ErrorCode::kInternal,
                          {"'only_inline'", "declined"}));
  const std::string text = service->metrics().render();
  // "bad", and the first "later", whose client gave up before the worker
  // was free: not run, answered with an error nobody waits for.
  EXPECT_NE(text.find("seqflow_request_errors_total{op=\"quick\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("seqflow_requests_expired_total{op=\"quick\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("seqflow_requests_total{op=\"only_inline\"} 2\n"), std::string::npos) << text;
}

TEST(ServiceConcurrency, MaxWorkersCapsThePool) {
  Gate release;
  std::atomic<int> blocked{0};
  auto service = echo_service(with_workers(1, 2), [&](Service& s) { add_blocking_op(s, release, blocked); });
  auto context = std::make_shared<zmq::context_t>();
  ConnectionPool pool(context, service->endpoint(), timeout_of(20s));
  std::vector<std::thread> callers;
  OpenAndJoin cleanup{release, callers};
  for (int i = 0; i < 2; ++i) callers.emplace_back([&] { pool.call("block", {}); });
  ASSERT_TRUE(wait_for_blocked(blocked, 2));
  // Both workers are blocked and the cap is reached: echo waits in the queue.
  EXPECT_TRUE(throws_code([&] { pool.call("echo", {}, 300ms); }, ErrorCode::kTimeout, {"'echo'", "300 ms"}));
  EXPECT_TRUE(pool.call("ping", {}, 2s).empty()) << "ping is answered by the I/O thread";
  EXPECT_NE(service->metrics().render().find("seqflow_service_workers 2\n"), std::string::npos);
  release.open();
  for (auto& caller : callers) caller.join();
  EXPECT_EQ(strings_of(pool.call("echo", frames_of({"x"}), 5s)), std::vector<std::string>{"x"});
}

// Deferred replies: an InlineHandler defers, another thread answers later;
// a client that disconnects first is reported gone, and a reply that can
// no longer reach its client runs its `undelivered`, from either path.
struct Deferred {
  std::mutex mutex;
  std::vector<DeferredReply> replies;
  std::atomic<int> gone{0};
  std::atomic<int> undelivered{0};

  void add_to(Service& service) {
    service.handle("later", nullptr, [this](const Frames&) -> std::optional<Frames> {
      DeferredReply reply = defer_reply([this] { ++gone; });
      std::lock_guard lock(mutex);
      replies.push_back(std::move(reply));
      return std::nullopt;
    });
  }
  size_t count() {
    std::lock_guard lock(mutex);
    return replies.size();
  }
  void send_all(const std::string& text) {
    std::lock_guard lock(mutex);
    for (auto& reply : replies) reply.send(frames_of({text}), [this] { ++undelivered; });
    replies.clear();
  }
};

TEST(ServiceConcurrency, ADeferredReplyComesFromAnotherThreadWithoutAWorker) {
  Deferred deferred;
  Gate release;
  std::atomic<int> blocked{0};
  auto service = echo_service(with_workers(1, 1), [&](Service& s) {
    deferred.add_to(s);
    add_blocking_op(s, release, blocked);
  });
  auto context = std::make_shared<zmq::context_t>();
  ConnectionPool pool(context, service->endpoint(), timeout_of(20s));
  std::vector<std::thread> callers;
  OpenAndJoin cleanup{release, callers};
  callers.emplace_back([&] { pool.call("block", {}); });  // the only worker is busy throughout
  ASSERT_TRUE(wait_for_blocked(blocked, 1));
  std::vector<std::string> answers(3);
  for (size_t i = 0; i < answers.size(); ++i) {
    callers.emplace_back([&, i] { answers[i] = strings_of(pool.call("later", {}, 10s)).at(0); });
  }
  ASSERT_TRUE(holds_within_10s([&] { return deferred.count() == 3; }));
  std::thread([&] { deferred.send_all("answered later"); }).join();
  release.open();
  for (auto& caller : callers) caller.join();
  callers.clear();
  EXPECT_EQ(answers, std::vector<std::string>(3, "answered later"));
  EXPECT_EQ(deferred.undelivered.load(), 0);
  EXPECT_EQ(deferred.gone.load(), 0);
}

TEST(ServiceConcurrency, AClientGoneBeforeItsDeferredReplyIsReportedAndTheReplyIsUndelivered) {
  Deferred deferred;
  auto service = echo_service({}, [&](Service& s) { deferred.add_to(s); });
  {
    zmq::context_t context;
    Connection leaving(context, service->endpoint(), timeout_of(20s));
    (void)leaving.send("later", {}, std::chrono::steady_clock::now() + 20s);
    ASSERT_TRUE(holds_within_10s([&] { return deferred.count() == 1; }));
  }  // closes its TCP connection
  ASSERT_TRUE(holds_within_10s([&] { return deferred.gone == 1; })) << "the client's disconnect went unnoticed";
  deferred.send_all("for nobody");
  EXPECT_TRUE(holds_within_10s([&] { return deferred.undelivered == 1; }));
}

// The disconnect is read before the request is: the I/O thread, held in an
// inline handler, finds the leaving client's 100 pings and its "later" queued,
// reads 64 (one batch), then the disconnect event, then "later". The
// deferral still learns that its client is gone.
TEST(ServiceConcurrency, AClientGoneBeforeItsRequestIsDeferredIsReported) {
  Deferred deferred;
  Gate release;
  std::atomic<int> stalled{0};
  auto service = echo_service({}, [&](Service& s) {
    deferred.add_to(s);
    s.handle("stall", nullptr, [&](const Frames&) -> std::optional<Frames> {
      ++stalled;
      release.wait();  // on the I/O thread
      return frames_of({"stalled"});
    });
  });
  std::vector<std::thread> callers;
  OpenAndJoin cleanup{release, callers};
  zmq::context_t context;
  Connection staying(context, service->endpoint(), timeout_of(20s));
  (void)staying.send("stall", {}, std::chrono::steady_clock::now() + 20s);
  ASSERT_TRUE(wait_for_blocked(stalled, 1));
  {
    Connection leaving(context, service->endpoint(), timeout_of(20s));
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (int i = 0; i < 100; ++i) (void)leaving.send("ping", {}, deadline);
    (void)leaving.send("later", {}, deadline);
  }                                    // closes its TCP connection
  std::this_thread::sleep_for(300ms);  // the disconnect event is queued before the I/O thread goes on
  release.open();
  ASSERT_TRUE(holds_within_10s([&] { return deferred.count() == 1; }));
  EXPECT_TRUE(holds_within_10s([&] { return deferred.gone == 1; })) << "the client's disconnect went unnoticed";
  deferred.send_all("for nobody");
}

// A deferred reply sent after its service stopped reaches nobody: its
// `undelivered` runs (a fetched batch goes back, not lost).
TEST(ServiceConcurrency, ADeferredReplySentAfterStopRunsItsUndelivered) {
  Deferred deferred;
  auto service = echo_service({}, [&](Service& s) { deferred.add_to(s); });
  zmq::context_t context;
  Connection waiting(context, service->endpoint(), timeout_of(20s));
  (void)waiting.send("later", {}, std::chrono::steady_clock::now() + 20s);
  ASSERT_TRUE(holds_within_10s([&] { return deferred.count() == 1; }));
  service->stop();
  deferred.send_all("too late");
  EXPECT_EQ(deferred.undelivered.load(), 1);
}

// A worker's reply to a client that left meanwhile: the router refuses it
// (mandatory routing) and the handler's `undelivered` runs.
TEST(ServiceConcurrency, AWorkersReplyToAGoneClientRunsItsUndelivered) {
  Deferred deferred;
  Gate release;
  std::atomic<int> blocked{0};
  std::atomic<int> undelivered{0};
  auto service = echo_service({}, [&](Service& s) {
    deferred.add_to(s);
    s.handle("block", [&](Frames& args) {
      on_undelivered([&] { ++undelivered; });
      ++blocked;
      release.wait();
      return std::move(args);
    });
  });
  std::vector<std::thread> callers;
  OpenAndJoin cleanup{release, callers};
  {
    zmq::context_t context;
    Connection leaving(context, service->endpoint(), timeout_of(20s));
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    (void)leaving.send("block", {}, deadline);
    (void)leaving.send("later", {}, deadline);  // its "gone" tells when the router has forgotten the client
    ASSERT_TRUE(wait_for_blocked(blocked, 1));
    ASSERT_TRUE(holds_within_10s([&] { return deferred.count() == 1; }));
  }
  ASSERT_TRUE(holds_within_10s([&] { return deferred.gone == 1; }));
  release.open();
  EXPECT_TRUE(holds_within_10s([&] { return undelivered == 1; }));
  deferred.send_all("for nobody");  // before the service goes: a DeferredReply must not outlive it
}
}  // namespace
}  // namespace seqflow::server
