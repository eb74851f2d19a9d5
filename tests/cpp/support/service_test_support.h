// Shared helpers of the transport and service tests: frames from strings, an
// echo service on a free loopback port, quick client options, a service
// that answers late and what a call's receive did, and a check of the
// metrics text format.
#pragma once

#include <gtest/gtest.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <ostream>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "transport/connection.h"
#include "transport/frames.h"
#include "server/service.h"
#include "test_support.h"

namespace seqflow::server::test {

using namespace seqflow::transport;

using namespace std::chrono_literals;
using seqflow::test::throws_code;
using seqflow::test::throws_invalid;

inline Frames frames_of(std::initializer_list<std::string_view> parts) {
  Frames frames;
  for (std::string_view part : parts) frames.push_back(copy_frame(part));
  return frames;
}

inline std::vector<std::string> strings_of(const Frames& frames) {
  std::vector<std::string> out;
  for (const auto& frame : frames) out.emplace_back(as_string_view(frame));
  return out;
}

inline ConnectionOptions timeout_of(std::chrono::milliseconds timeout) {
  ConnectionOptions options;
  options.timeout = timeout;
  return options;
}

// Handlers wait on a gate until the test opens it; opening twice is fine.
class Gate {
 public:
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    opened_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

// Opens the gate and joins the threads however the test ends (a failed
// ASSERT returns early; joinable threads would abort the binary).
struct OpenAndJoin {
  Gate& gate;
  std::vector<std::thread>& threads;
  ~OpenAndJoin() {
    gate.open();
    for (auto& thread : threads) {
      if (thread.joinable()) thread.join();
    }
  }
};

inline ServiceOptions with_workers(size_t min_workers, size_t max_workers) {
  ServiceOptions options;
  options.min_workers = min_workers;
  options.max_workers = max_workers;
  return options;
}

// Op "block": its handlers count themselves in `blocked`, then wait for `release`.
inline void add_blocking_op(Service& service, Gate& release, std::atomic<int>& blocked) {
  service.handle("block", [&release, &blocked](Frames& args) {
    ++blocked;
    release.wait();
    return std::move(args);
  });
}

// True once `condition` holds; false if it still does not after 10 s.
inline bool holds_within_10s(const std::function<bool()>& condition) {
  const auto start = std::chrono::steady_clock::now();
  while (!condition()) {
    if (std::chrono::steady_clock::now() - start > 10s) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// True once `count` handlers are blocked; false after 10 s.
inline bool wait_for_blocked(const std::atomic<int>& blocked, int count) {
  return holds_within_10s([&] { return blocked >= count; });
}

// A started service with op "echo" (results = args) plus whatever `add` registers.
inline std::unique_ptr<Service> echo_service(ServiceOptions options = {},
                                             const std::function<void(Service&)>& add = {}) {
  auto service = std::make_unique<Service>(std::move(options));
  service->handle("echo", [](Frames& args) { return std::move(args); });
  if (add) add(*service);
  service->start();
  return service;
}

// Client options: a 20 s timeout and this busy_poll.
inline ConnectionOptions busy_poll_of(std::chrono::microseconds busy_poll) {
  ConnectionOptions options = timeout_of(20s);
  options.busy_poll = busy_poll;
  return options;
}

// A service whose "sleep" op answers after the milliseconds it is given.
inline std::unique_ptr<Service> sleeping_service() {
  return echo_service({}, [](Service& s) {
    s.handle("sleep", [](Frames& args) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(strings_of(args).at(0))));
      return Frames();
    });
  });
}

// `count` connections to `service` with `options`.
inline std::vector<std::unique_ptr<Connection>> connections_to(zmq::context_t& context, const Service& service,
                                                               size_t count, const ConnectionOptions& options) {
  std::vector<std::unique_ptr<Connection>> connections;
  for (size_t c = 0; c < count; ++c)
    connections.push_back(std::make_unique<Connection>(context, service.endpoint(), options));
  return connections;
}

// One thread per connection calls op "block" (add_blocking_op) on it; a call
// that throws counts in `failed_calls`.
inline void start_blocked_calls(const std::vector<std::unique_ptr<Connection>>& connections,
                                std::vector<std::thread>& threads, std::atomic<int>& failed_calls) {
  for (const auto& connection : connections) {
    threads.emplace_back([&failed_calls, &connection = *connection] {
      try {
        connection.call("block", {});
      } catch (const std::exception&) {
        ++failed_calls;
      }
    });
  }
}

// True once receive_counts().*field of every connection reaches `count`;
// false after 10 s.
inline bool receive_counts_reach(const std::vector<std::unique_ptr<Connection>>& connections,
                                 uint64_t ReceiveCounts::*field, uint64_t count) {
  return holds_within_10s([&] {
    for (const auto& connection : connections) {
      if (connection->receive_counts().*field < count) return false;
    }
    return true;
  });
}

// What the receive of a call whose reply comes after `sleep` did.
inline ReceiveCounts receive_counts_of_call(Connection& connection, std::chrono::milliseconds sleep) {
  const ReceiveCounts before = connection.receive_counts();
  connection.call("sleep", frames_of({std::to_string(sleep.count())}));
  const ReceiveCounts after = connection.receive_counts();
  return {after.spun - before.spun, after.slept - before.slept,
          after.spins_skipped_after_a_slow_reply - before.spins_skipped_after_a_slow_reply,
          after.spins_withheld_for_other_waiters - before.spins_withheld_for_other_waiters};
}

// Every line is a # HELP, a # TYPE or a sample of the text exposition format.
inline ::testing::AssertionResult is_prometheus_text(const std::string& text) {
  static const std::regex help(R"(# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*)");
  static const std::regex type(R"(# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram|summary|untyped))");
  static const std::regex sample(
      R"([a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")"
      R"((,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*\})? (NaN|[+-]Inf|-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?))");
  if (text.empty() || text.back() != '\n') return ::testing::AssertionFailure() << "must end with a newline";
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!std::regex_match(line, help) && !std::regex_match(line, type) && !std::regex_match(line, sample)) {
      return ::testing::AssertionFailure() << "bad line: " << line;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace seqflow::server::test

namespace seqflow::transport {

// Readable failures of EXPECT_EQ on ReceiveCounts.
inline void PrintTo(const ReceiveCounts& counts, std::ostream* out) {
  *out << "{spun " << counts.spun << ", slept " << counts.slept << ", skipped after a slow reply "
       << counts.spins_skipped_after_a_slow_reply << ", withheld for other waiters "
       << counts.spins_withheld_for_other_waiters << "}";
}

}  // namespace seqflow::transport
