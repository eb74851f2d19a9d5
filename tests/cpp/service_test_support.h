// Shared helpers of the transport and service tests: frames from strings, an
// echo service on a free loopback port, quick client options.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
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

// True once `count` handlers are blocked; false after 10 s.
inline bool wait_for_blocked(const std::atomic<int>& blocked, int count) {
  const auto start = std::chrono::steady_clock::now();
  while (blocked < count) {
    if (std::chrono::steady_clock::now() - start > 10s) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
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

}  // namespace seqflow::server::test
