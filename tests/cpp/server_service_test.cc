#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <latch>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <zmq_addon.hpp>

#include "transport/envelope.h"
#include "service_test_support.h"

namespace seqflow::server {
namespace {

using namespace seqflow::server::test;

TEST(NetService, EchoRoundTripWithMultipartFrames) {
  auto service = echo_service();
  zmq::context_t context;
  Connection connection(context, service->endpoint(), timeout_of(5s));
  EXPECT_EQ(service->endpoint().rfind("tcp://127.0.0.1:", 0), 0u) << service->endpoint();
  EXPECT_NE(service->endpoint(), "tcp://127.0.0.1:0");
  EXPECT_EQ(strings_of(connection.call("echo", frames_of({"a", "", "ccc"}))),
            (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_TRUE(connection.call("echo", {}).empty());
  EXPECT_TRUE(connection.call("ping", {}).empty());
}

TEST(NetService, EchoesLargeZeroCopyFrames) {
  auto service = echo_service();
  zmq::context_t context;
  Connection connection(context, service->endpoint(), timeout_of(20s));
  const size_t size = size_t{64} << 20;
  std::vector<std::byte> bytes(size);
  for (size_t i = 0; i < size; i += 4096) bytes[i] = static_cast<std::byte>(i / 4096);
  auto buffer = Buffer::copy_of(bytes);
  Frames args;
  args.push_back(copy_frame(std::string_view("header")));
  args.push_back(frame_of(buffer, 0, size));
  args.push_back(frame_of(buffer, 1000, 5000));
  Frames results = connection.call("echo", std::move(args));
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(as_string_view(results[0]), "header");
  auto received = buffer_of(std::move(results[1]));
  ASSERT_EQ(received->size, size);
  EXPECT_EQ(std::memcmp(received->data, bytes.data(), size), 0);
  ASSERT_EQ(results[2].size(), 5000u);
  EXPECT_EQ(std::memcmp(results[2].data(), bytes.data() + 1000, 5000), 0);
}

TEST(NetService, UnknownOpGetsNotFoundAndTheServiceKeepsServing) {
  auto service = echo_service();
  zmq::context_t context;
  Connection connection(context, service->endpoint(), timeout_of(5s));
  EXPECT_TRUE(throws_code([&] { connection.call("no_such_op", {}); }, ErrorCode::kNotFound,
                          {"unknown operation 'no_such_op'", "echo", "ping"}));
  EXPECT_EQ(strings_of(connection.call("echo", frames_of({"still here"}))), std::vector<std::string>{"still here"});
}

TEST(NetService, HandlerExceptionsBecomeErrorRepliesWithTheirCodes) {
  auto service = echo_service({}, [](Service& s) {
    s.handle("fail", [](Frames& args) -> Frames {
      const int code = std::stoi(std::string(as_string_view(args.at(0))));
      throw Error(static_cast<ErrorCode>(code), "field 'x' has bad value " + std::to_string(code));
    });
    s.handle("std_fail", [](Frames&) -> Frames { throw std::runtime_error("disk on fire"); });
    s.handle("odd_fail", [](Frames&) -> Frames { throw 42; });
  });
  zmq::context_t context;
  Connection connection(context, service->endpoint(), timeout_of(5s));
  for (ErrorCode code : {ErrorCode::kInvalidArgument, ErrorCode::kNotFound, ErrorCode::kTimeout,
                         ErrorCode::kInternal}) {
    const std::string number = std::to_string(static_cast<int>(code));
    EXPECT_TRUE(throws_code([&] { connection.call("fail", frames_of({number})); }, code,
                            {"field 'x' has bad value " + number}));
  }
  EXPECT_TRUE(throws_code([&] { connection.call("std_fail", {}); }, ErrorCode::kInternal,
                          {"'std_fail'", "disk on fire"}));
  EXPECT_TRUE(throws_code([&] { connection.call("odd_fail", {}); }, ErrorCode::kInternal, {"'odd_fail'"}));
  EXPECT_EQ(strings_of(connection.call("echo", frames_of({"ok"}))), std::vector<std::string>{"ok"});
  const std::string text = service->metrics().render();
  EXPECT_NE(text.find("seqflow_request_errors_total{op=\"fail\"} 4"), std::string::npos) << text;
}

TEST(NetService, MalformedRawMessagesDoNotStopTheService) {
  auto service = echo_service();
  zmq::context_t context;
  zmq::socket_t raw(context, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(service->endpoint());
  const std::vector<std::vector<std::string>> garbage = {
      {""},
      {"", ""},
      {"short"},
      {std::string(8, '\x01')},
      {std::string(8, '\x02') + std::string(100, 'x'), "arg"},
      {std::string(8, '\x03') + "\xff\xff"},
      {std::string(1000, '\xee'), "", std::string(3, '\0')},
  };
  for (const auto& message : garbage) {
    for (size_t i = 0; i < message.size(); ++i) {
      raw.send(copy_frame(message[i]), i + 1 < message.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
  // Each gets an error reply (id 0 when the envelope is too short to hold one).
  raw.set(zmq::sockopt::rcvtimeo, 5000);
  for (size_t n = 0; n < garbage.size(); ++n) {
    Frames reply;
    ASSERT_TRUE(zmq::recv_multipart(raw, std::back_inserter(reply))) << "no reply to garbage " << n;
    ASSERT_EQ(reply.size(), 2u);
    const ReplyEnvelope envelope = decode_reply_envelope(reply[0]);
    EXPECT_EQ(envelope.error, ErrorCode::kInvalidArgument);
    EXPECT_NE(as_string_view(reply[1]).find("malformed request"), std::string_view::npos);
  }
  Connection connection(context, service->endpoint(), timeout_of(5s));
  EXPECT_TRUE(connection.call("ping", {}).empty());
  EXPECT_NE(service->metrics().render().find("seqflow_rejected_requests_total{reason=\"malformed\"} 7"),
            std::string::npos);
}

TEST(NetService, RequestOverMaxRequestBytesGetsAnErrorNamingBothSizes) {
  ServiceOptions options;
  options.max_request_bytes = 1000;
  auto service = echo_service(options);
  zmq::context_t context;
  Connection connection(context, service->endpoint(), timeout_of(5s));
  EXPECT_TRUE(throws_invalid([&] { connection.call("echo", frames_of({std::string(600, 'a'), std::string(600, 'b')})); },
                             {"'echo'", "1212 bytes", "max_request_bytes = 1000"}));
  EXPECT_EQ(connection.call("echo", frames_of({std::string(900, 'a')})).size(), 1u);
}

TEST(NetService, BindFailuresNameTheAddress) {
  auto first = echo_service();
  ServiceOptions options;
  options.bind = first->endpoint();
  Service second(options);
  EXPECT_TRUE(throws_invalid([&] { second.start(); }, {first->endpoint()}));
  options.bind = "tcp://no.such.host.invalid:1";
  Service third(options);
  EXPECT_TRUE(throws_invalid([&] { third.start(); }, {"tcp://no.such.host.invalid:1"}));
}

TEST(NetService, OptionsAndHandlersAreChecked) {
  ServiceOptions options;
  options.max_workers = 0;
  EXPECT_TRUE(throws_invalid([&] { Service service(options); }, {"max_workers", "0"}));
  options.max_workers = 2;
  options.min_workers = 3;
  EXPECT_TRUE(throws_invalid([&] { Service service(options); }, {"min_workers (3)", "max_workers (2)"}));
  options.min_workers = 1;
  options.security.enabled = true;
  EXPECT_TRUE(throws_invalid([&] { Service service(options); }, {"server_keys.secret_key"}));

  Service service(ServiceOptions{});
  auto echo = [](Frames& args) { return std::move(args); };
  EXPECT_TRUE(throws_invalid([&] { service.handle("ping", echo); }, {"'ping'", "already"}));
  EXPECT_TRUE(throws_invalid([&] { service.handle("", echo); }, {"operation name"}));
  EXPECT_TRUE(throws_invalid([&] { service.handle("empty", nullptr); }, {"'empty'", "no handler"}));
  EXPECT_TRUE(throws_invalid([&] { service.handle("empty", nullptr, nullptr); }, {"'empty'", "no handler"}));
  service.handle("echo", echo);
  EXPECT_TRUE(throws_invalid([&] { service.handle("echo", echo); }, {"'echo'", "already"}));
  service.start();
  EXPECT_TRUE(throws_invalid([&] { service.handle("late", echo); }, {"'late'", "before start"}));
  EXPECT_TRUE(throws_invalid([&] { service.start(); }, {"already started"}));
  service.stop();
  service.stop();
}

TEST(NetService, StopLetsRunningHandlersFinishAndAnswer) {
  std::latch entered(1);
  std::atomic<bool> finished{false};
  auto service = echo_service({}, [&](Service& s) {
    s.handle("slow", [&](Frames& args) {
      entered.count_down();
      std::this_thread::sleep_for(300ms);
      finished = true;
      return std::move(args);
    });
  });
  zmq::context_t context;
  Connection connection(context, service->endpoint(), timeout_of(5s));
  std::vector<std::string> answer;
  std::thread caller([&] { answer = strings_of(connection.call("slow", frames_of({"done"}))); });
  entered.wait();
  service->stop();
  EXPECT_TRUE(finished);
  caller.join();
  EXPECT_EQ(answer, std::vector<std::string>{"done"});
}

// Eight handlers block on a gate; other requests still get workers.
TEST(NetServiceConcurrency, BlockedHandlersDoNotHoldBackOthers) {
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
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(strings_of(pool.call("echo", frames_of({"through"}), 5s)), std::vector<std::string>{"through"});
  EXPECT_TRUE(pool.call("ping", {}, 5s).empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  release.open();
  for (auto& caller : callers) caller.join();
  EXPECT_EQ(answered.load(), 8);
}

// The only worker is blocked: an inline answer still comes (the I/O thread
// gives it), a declined one waits for the worker and reaches it with its
// arguments untouched, and an inline exception is an error reply.
TEST(NetServiceConcurrency, InlineHandlersAnswerWithoutAWorkerOrHandOverUntouched) {
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
  EXPECT_TRUE(throws_code([&] { pool.call("quick", frames_of({"later"}), 300ms); }, ErrorCode::kTimeout,
                          {"'quick'"}))
      << "a declined request must wait for a worker";
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
  EXPECT_NE(text.find("seqflow_request_errors_total{op=\"quick\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("seqflow_requests_total{op=\"only_inline\"} 2\n"), std::string::npos) << text;
}

TEST(NetServiceConcurrency, MaxWorkersCapsThePool) {
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

}  // namespace
}  // namespace seqflow::server
