// Frames a storage unit keeps alive for a client that copies them out of
// its memory (local_copy): one lease per get reply, given back by the
// client once it has read them. A client that never gives a lease back
// (it died, it hung) loses it after `lifetime`; giving it back late says so,
// and the client treats what it read as lost. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "transport/frames.h"

namespace seqflow::transport {

class FrameLeases {
 public:
  using Clock = std::chrono::steady_clock;

  explicit FrameLeases(std::chrono::milliseconds lifetime);

  // Keeps the frames until release(id) or `lifetime` from now.
  uint64_t hold(Frames frames);
  // False when the lease ran out (or never was): its frames may have been
  // freed while the client read them.
  bool release(uint64_t id);
  size_t held() const;

 private:
  void drop_expired(Clock::time_point now);  // caller holds mutex_

  struct Lease {
    Frames frames;
    Clock::time_point expiry;
  };
  std::chrono::milliseconds lifetime_;
  mutable std::mutex mutex_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Lease> leases_;
};

}  // namespace seqflow::transport
