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
  std::lock_guard lock(mutex_);
  const uint64_t grant = next_grant_++;
  by_key_[Key{partition_id, global_indexes.front()}] = grant;
  expiries_.emplace(expiry, grant);
  const bool earliest = expiries_.begin()->second == grant;
  leases_.emplace(grant,
                  Lease{partition_id, std::move(global_indexes), std::move(generations), made_partition, expiry});
  if (earliest) wake_.notify_all();
}

void InsertLeases::settle(const std::string& partition_id, std::span<const int64_t> global_indexes) {
  if (global_indexes.empty()) return;
  std::lock_guard lock(mutex_);
  if (leases_.empty()) return;
  const auto key = by_key_.find(Key{partition_id, global_indexes.front()});
  if (key == by_key_.end()) return;
  const auto found = leases_.find(key->second);
  const std::vector<int64_t>& leased = found->second.global_indexes;
  if (!std::equal(leased.begin(), leased.end(), global_indexes.begin(), global_indexes.end())) return;
  expiries_.erase({found->second.expiry, found->first});
  leases_.erase(found);
  by_key_.erase(key);
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
    const uint64_t grant = expiries_.begin()->second;
    expiries_.erase(expiries_.begin());
    auto found = leases_.find(grant);
    Lease lease = std::move(found->second);
    leases_.erase(found);
    const Key key{lease.partition_id, lease.global_indexes.front()};
    if (const auto newest = by_key_.find(key); newest != by_key_.end() && newest->second == grant) {
      by_key_.erase(newest);
    }
    lock.unlock();
    try {
      reclaim_(lease.partition_id, lease.global_indexes, lease.generations, lease.made_partition);
      lock.lock();
    } catch (const std::exception&) {
      lock.lock();
      if (!stopping_) {  // retried a second later, under a grant of its own
        lease.expiry = Clock::now() + kRetryAfter;
        const uint64_t retry = next_grant_++;
        expiries_.emplace(lease.expiry, retry);
        leases_.emplace(retry, std::move(lease));
      }
    }
  }
}

}  // namespace seqflow::server
