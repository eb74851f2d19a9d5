// One deadline for a whole client call (a put and its rollback), honoured by
// every request the remote planes send for it on this thread. ControlPlane
// and DataPlane stay deadline-free: they are public interfaces that the
// embedded Controller and StorageUnit implement too, where nothing waits on
// a network, and a put's nested calls (partition checks, rollback clears)
// all see the scope without each growing a deadline parameter.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace seqflow {

class CallDeadline {
 public:
  using Clock = std::chrono::steady_clock;

  // Until destroyed, requests on this thread end by `deadline`. Scopes nest;
  // the innermost one rules (a rollback scope may extend the put's).
  explicit CallDeadline(Clock::time_point deadline);
  ~CallDeadline();
  CallDeadline(const CallDeadline&) = delete;
  CallDeadline& operator=(const CallDeadline&) = delete;

  // The deadline of a request starting now that may take `timeout`: now +
  // timeout, cut to the innermost scope's deadline.
  static Clock::time_point of_request(std::chrono::milliseconds timeout);

  // kTimeout naming the request `op` to `endpoint`, which is not sent: the
  // call it is part of has run out of time and could not await its reply.
  [[noreturn]] static void throw_passed(std::string_view op, const std::string& endpoint);
  static void check_open(Clock::time_point deadline, std::string_view op, const std::string& endpoint) {
    if (deadline <= Clock::now()) throw_passed(op, endpoint);
  }

 private:
  std::optional<Clock::time_point> outer_;
};

}  // namespace seqflow
