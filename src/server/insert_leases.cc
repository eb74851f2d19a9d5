#include "server/insert_leases.h"

#include <algorithm>
#include <exception>

namespace seqflow::server {
namespace {

constexpr auto kRetryAfter = std::chrono::seconds(1);

}  // namespace

InsertLeases::InsertLeases(Reclaim reclaim) : reclaim_(std::move(reclaim)) {
  thread_ = std::thread(&InsertLeases::run, this);
}

InsertLeases::~InsertLeases() { stop(); }

void InsertLeases::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void InsertLeases::grant(const std::string& partition_id, std::vector<int64_t> global_indexes,
                         std::vector<uint64_t> generations, bool made_partition, Clock::time_point expiry) {
  if (global_indexes.empty()) return;
  Key key{partition_id, global_indexes.front()};
  std::lock_guard lock(mutex_);
  // An index is live in one partition at a time: a lease of the same key is
  // of samples cleared since, and settled by then.
  if (const auto old = leases_.find(key); old != leases_.end()) {
    expiries_.erase({old->second.expiry, key});
    leases_.erase(old);
  }
  expiries_.emplace(expiry, key);
  const bool earliest = expiries_.begin()->second == key;
  leases_.emplace(std::move(key), Lease{std::move(global_indexes), std::move(generations), made_partition, expiry});
  if (earliest) wake_.notify_all();
}

void InsertLeases::settle(const std::string& partition_id, std::span<const int64_t> global_indexes) {
  if (global_indexes.empty()) return;
  std::lock_guard lock(mutex_);
  if (leases_.empty()) return;
  const auto found = leases_.find(Key{partition_id, global_indexes.front()});
  if (found == leases_.end()) return;
  const std::vector<int64_t>& leased = found->second.global_indexes;
  if (!std::equal(leased.begin(), leased.end(), global_indexes.begin(), global_indexes.end())) return;
  expiries_.erase({found->second.expiry, found->first});
  leases_.erase(found);
}

size_t InsertLeases::held() const {
  std::lock_guard lock(mutex_);
  return leases_.size();
}

void InsertLeases::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (expiries_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const Clock::time_point next = expiries_.begin()->first;  // a copy: the set changes while it waits
    if (Clock::now() < next) {
      wake_.wait_until(lock, next);
      continue;
    }
    const Key key = expiries_.begin()->second;
    expiries_.erase(expiries_.begin());
    auto found = leases_.find(key);
    Lease lease = std::move(found->second);
    leases_.erase(found);
    lock.unlock();
    try {
      reclaim_(key.first, lease.global_indexes, lease.generations, lease.made_partition);
      lock.lock();
    } catch (const std::exception&) {
      lock.lock();
      // Retried unless a new lease of the same samples took its place.
      if (!stopping_ && leases_.count(key) == 0) {
        lease.expiry = Clock::now() + kRetryAfter;
        expiries_.emplace(lease.expiry, key);
        leases_.emplace(key, std::move(lease));
      }
    }
  }
}

}  // namespace seqflow::server
