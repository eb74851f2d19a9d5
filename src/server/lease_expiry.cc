#include "server/lease_expiry.h"

#include <algorithm>
#include <exception>

namespace seqflow::server {

LeaseExpiry::LeaseExpiry(Controller& controller) : controller_(controller), thread_([this] { run(); }) {}

LeaseExpiry::~LeaseExpiry() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void LeaseExpiry::poke() {
  {
    std::lock_guard lock(mutex_);
    poked_ = true;
  }
  wake_.notify_all();
}

void LeaseExpiry::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    poked_ = false;
    lock.unlock();
    auto wake_at = std::chrono::steady_clock::now() + kLeaseCheck;
    try {
      // The controller tells waiting fetches (its change listener) what came back.
      if (const auto next = controller_.expire_leases()) wake_at = std::min(wake_at, *next);
    } catch (const std::exception&) {
      // Out of memory giving back: the leases stay expired, tried again at the next check.
    }
    lock.lock();
    wake_.wait_until(lock, wake_at, [this] { return stopping_ || poked_; });
  }
}

}  // namespace seqflow::server
