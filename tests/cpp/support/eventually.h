// Waiting on a condition with a deadline, instead of sleeping a guessed time.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace seqflow::test {

// True once `condition` holds, false if it does not within `limit`.
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace seqflow::test
