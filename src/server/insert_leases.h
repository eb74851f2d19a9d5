// The controller service's inserts as leases of their producer: a put
// inserts its samples, puts their data and marks them produced, all within
// its client's budget. If the producer dies in between (or its connection
// does), nobody ever marks them produced; once the lease expires, the
// samples it left unproduced are reclaimed (removed, their storage freed),
// so that consumers and finite streams do not wait for them forever.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace seqflow::server {

class InsertLeases {
 public:
  using Clock = std::chrono::steady_clock;
  // Removes the samples of an expired lease that are still unproduced and
  // frees their storage; `made_partition`: the insert made the partition
  // (then it goes too if that leaves it unused). It throws to be retried a
  // second later (a storage unit that cannot be reached, say).
  using Reclaim = std::function<void(const std::string& partition_id, const std::vector<int64_t>& global_indexes,
                                     const std::vector<uint64_t>& generations, bool made_partition)>;

  // Starts the thread that reclaims expired leases.
  explicit InsertLeases(Reclaim reclaim);
  ~InsertLeases();  // stop()
  InsertLeases(const InsertLeases&) = delete;
  InsertLeases& operator=(const InsertLeases&) = delete;

  // One insert's samples, until `expiry`.
  void grant(const std::string& partition_id, std::vector<int64_t> global_indexes, std::vector<uint64_t> generations,
             bool made_partition, Clock::time_point expiry);
  // The producer marked these samples produced: a lease of exactly them
  // (its first index names it) is settled. Other marks are no-ops; a lease
  // they cover partly is checked at expiry.
  void settle(const std::string& partition_id, std::span<const int64_t> global_indexes);
  size_t held() const;
  // Joins the thread; leases left are forgotten. Idempotent.
  void stop();

 private:
  using Key = std::pair<std::string, int64_t>;  // partition, first global index: how settle() finds a lease
  struct Lease {
    std::string partition_id;
    std::vector<int64_t> global_indexes;
    std::vector<uint64_t> generations;
    bool made_partition = false;
    Clock::time_point expiry;
  };

  void run();

  Reclaim reclaim_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  uint64_t next_grant_ = 1;
  std::map<uint64_t, Lease> leases_;  // by grant
  // The newest grant of each key. An older lease of the same key (its first
  // sample cleared and reused meanwhile) keeps running until it expires.
  std::map<Key, uint64_t> by_key_;
  std::set<std::pair<Clock::time_point, uint64_t>> expiries_;
  std::thread thread_;
};

}  // namespace seqflow::server
