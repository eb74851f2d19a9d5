#include "transport/frame_leases.h"

#include <string>

#include "seqflow/error.h"

namespace seqflow::transport {

FrameLeases::FrameLeases(std::chrono::milliseconds lifetime) : lifetime_(lifetime) {
  if (lifetime.count() <= 0) {
    throw_invalid("lease lifetime must be positive, got " + std::to_string(lifetime.count()) + " ms");
  }
}

uint64_t FrameLeases::hold(Frames frames) {
  const auto now = Clock::now();
  std::lock_guard lock(mutex_);
  drop_expired(now);
  const uint64_t id = next_id_++;
  leases_.emplace(id, Lease{std::move(frames), now + lifetime_});
  return id;
}

bool FrameLeases::release(uint64_t id) {
  Frames freed;  // destroyed after the lock is given up
  std::lock_guard lock(mutex_);
  drop_expired(Clock::now());
  const auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  freed = std::move(it->second.frames);
  leases_.erase(it);
  return true;
}

size_t FrameLeases::held() const {
  std::lock_guard lock(mutex_);
  return leases_.size();
}

void FrameLeases::drop_expired(Clock::time_point now) {
  std::erase_if(leases_, [now](const auto& entry) { return entry.second.expiry <= now; });
}

}  // namespace seqflow::transport
