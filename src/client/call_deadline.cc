#include "client/call_deadline.h"

#include <algorithm>

#include "seqflow/error.h"

namespace seqflow {
namespace {

thread_local std::optional<CallDeadline::Clock::time_point> current_deadline;

}  // namespace

CallDeadline::CallDeadline(Clock::time_point deadline) : outer_(current_deadline) { current_deadline = deadline; }

CallDeadline::~CallDeadline() { current_deadline = outer_; }

CallDeadline::Clock::time_point CallDeadline::of_request(std::chrono::milliseconds timeout) {
  const Clock::time_point own = Clock::now() + timeout;
  return current_deadline ? std::min(own, *current_deadline) : own;
}

void CallDeadline::throw_passed(std::string_view op, const std::string& endpoint) {
  throw Error(ErrorCode::kTimeout,
              "request '" + std::string(op) + "' to " + endpoint + " not sent: the call it is part of ran out of time");
}

}  // namespace seqflow
