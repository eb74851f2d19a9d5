#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <latch>
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

TEST(Service, ABindPortOutsideTheRangeIsRefusedNotWrapped) {
  for (const std::string port : {"-5", "99999", "65536", "", "80x"}) {
    ServiceOptions options;
    options.bind = "tcp://127.0.0.1:" + port;
    EXPECT_TRUE(
        throws_invalid([&] { Service service(options); }, {"tcp://127.0.0.1:" + port, "0 (a free one) or 1..65535"}))
        << port;
  }
  ServiceOptions star;
  star.bind = "tcp://127.0.0.1:*";
  Service service(star);
  service.start();
  EXPECT_NE(service.endpoint().find("tcp://127.0.0.1:"), std::string::npos);
}

TEST(Service, EchoRoundTripWithMultipartFrames) {
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

TEST(Service, EchoesLargeZeroCopyFrames) {
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

TEST(Service, UnknownOpGetsNotFoundAndTheServiceKeepsServing) {
  auto service = echo_service();
  zmq::context_t context;
  Connection connection(context, service->endpoint(), timeout_of(5s));
  EXPECT_TRUE(throws_code([&] { connection.call("no_such_op", {}); }, ErrorCode::kNotFound,
                          {"unknown operation 'no_such_op'", "echo", "ping"}));
  EXPECT_EQ(strings_of(connection.call("echo", frames_of({"still here"}))), std::vector<std::string>{"still here"});
}

TEST(Service, HandlerExceptionsBecomeErrorRepliesWithTheirCodes) {
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
  for (ErrorCode code :
       {ErrorCode::kInvalidArgument, ErrorCode::kNotFound, ErrorCode::kTimeout, ErrorCode::kInternal}) {
    const std::string number = std::to_string(static_cast<int>(code));
    EXPECT_TRUE(throws_code([&] { connection.call("fail", frames_of({number})); }, code,
                            {"field 'x' has bad value " + number}));
  }
  EXPECT_TRUE(
      throws_code([&] { connection.call("std_fail", {}); }, ErrorCode::kInternal, {"'std_fail'", "disk on fire"}));
  EXPECT_TRUE(throws_code([&] { connection.call("odd_fail", {}); }, ErrorCode::kInternal, {"'odd_fail'"}));
  EXPECT_EQ(strings_of(connection.call("echo", frames_of({"ok"}))), std::vector<std::string>{"ok"});
  const std::string text = service->metrics().render();
  EXPECT_NE(text.find("seqflow_request_errors_total{op=\"fail\"} 4"), std::string::npos) << text;
}

TEST(Service, MalformedRawMessagesDoNotStopTheService) {
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

TEST(Service, RequestOverMaxRequestBytesGetsAnErrorNamingBothSizes) {
  ServiceOptions options;
  options.max_request_bytes = 1000;
  auto service = echo_service(options);
  zmq::context_t context;
  Connection connection(context, service->endpoint(), timeout_of(5s));
  EXPECT_TRUE(throws_invalid(
      [&] {
        connection.call("echo", frames_of({std::string(600, 'a'), std::string(600, 'b')}));
      },
      {"'echo'", "1217 bytes", "max_request_bytes = 1000"}));
  EXPECT_EQ(connection.call("echo", frames_of({std::string(900, 'a')})).size(), 1u);
}

TEST(Service, BindFailuresNameTheAddress) {
  auto first = echo_service();
  ServiceOptions options;
  options.bind = first->endpoint();
  Service second(options);
  EXPECT_TRUE(throws_invalid([&] { second.start(); }, {first->endpoint()}));
  options.bind = "tcp://no.such.host.invalid:1";
  Service third(options);
  EXPECT_TRUE(throws_invalid([&] { third.start(); }, {"tcp://no.such.host.invalid:1"}));
}

TEST(Service, OptionsAndHandlersAreChecked) {
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

TEST(Service, StopLetsRunningHandlersFinishAndAnswer) {
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

}  // namespace
}  // namespace seqflow::server
