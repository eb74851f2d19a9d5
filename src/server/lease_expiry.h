// The controller service's thread that gives back what expired fetch leases
// held (Controller::expire_leases), so that waiting fetches are served the
// samples of a consumer that died even while no other call comes in. It
// wakes at the earliest expiry, when a new lease may expire earlier (poke),
// and at least every kLeaseCheck (a fetch answered by a waiter leases
// without a poke).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "seqflow/controller.h"

namespace seqflow::server {

inline constexpr std::chrono::milliseconds kLeaseCheck{250};

class LeaseExpiry {
 public:
  explicit LeaseExpiry(Controller& controller);  // starts the thread
  ~LeaseExpiry();                                // stops it
  LeaseExpiry(const LeaseExpiry&) = delete;
  LeaseExpiry& operator=(const LeaseExpiry&) = delete;

  // A lease was just taken: it may expire before the thread would wake.
  void poke();

 private:
  void run();

  Controller& controller_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool poked_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace seqflow::server
