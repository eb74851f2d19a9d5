// Blocking fetches of the controller service, waiting without a thread
// each: a get_meta that cannot be answered yet is a registered waiter (its
// request and its DeferredReply). One thread retries the waiters of a
// partition when the controller reports a change in it, answers them, and
// fails them with kTimeout at their deadline; a waiter whose client's
// connection closed is dropped. 10,000 waiters cost their requests' memory.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "seqflow/controller.h"
#include "server/service.h"

namespace seqflow::server {

// What undoes a fetch whose reply reached nobody (on_undelivered,
// DeferredReply::send): its samples go back to the task's queue, for the
// next fetch. Null unless the controller called the answer returnable
// (Controller::try_get_meta): nothing consumed, or a sampler's reservation.
std::function<void()> giving_back(Controller& controller, const MetaRequest& request, const BatchMeta& meta,
                                  bool returnable);

class FetchWaiters {
 public:
  using Clock = std::chrono::steady_clock;

  // Listens to `controller`'s changes (Controller::on_change) from here on
  // and starts the thread.
  explicit FetchWaiters(Controller& controller);
  ~FetchWaiters();  // stop()
  FetchWaiters(const FetchWaiters&) = delete;
  FetchWaiters& operator=(const FetchWaiters&) = delete;

  // Inside the get_meta InlineHandler, after Controller::try_get_meta found
  // nothing ready: defers the request's reply (defer_reply) and waits for
  // `request` until `deadline`. `identity` is the request's encoding: waiters
  // with the same one get the same answer, so once one of them is not ready
  // the others are not tried on that change.
  void wait(MetaRequest request, std::string identity, Clock::time_point deadline);

  // Joins the thread and stops listening; waiters left get no reply (their
  // service is stopping, their clients time out). Idempotent.
  void stop();

 private:
  // Shared, not copied, with a round that runs outside the lock.
  struct Waiter {
    std::shared_ptr<const MetaRequest> request;
    std::shared_ptr<const std::string> identity;
    Clock::time_point since;
    Clock::time_point deadline;
    DeferredReply reply;
  };
  struct Attempt {
    uint64_t id = 0;
    std::shared_ptr<const MetaRequest> request;
    std::shared_ptr<const std::string> identity;
  };

  void changed(const std::string* partition_id);  // the controller's listener
  void drop(uint64_t id);                         // its client is gone
  void run();
  // Under mutex_: the waiters a round tries (in changed partitions, and
  // new ones), and the expired ones, taken out.
  std::vector<Attempt> take_round(std::vector<std::pair<uint64_t, Waiter>>& expired);
  // Under mutex_: the waiter, out of every index; nullopt if dropped.
  std::optional<Waiter> take_locked(uint64_t id);
  // Outside mutex_: replies to a waiter taken out.
  void answer(Waiter& waiter, BatchMeta meta, bool returnable);
  void finish_at_deadline(Waiter& waiter);

  Controller& controller_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Waiter> waiters_;  // by id: arrival order
  std::unordered_map<std::string, std::set<uint64_t>> by_partition_;
  std::set<std::pair<Clock::time_point, uint64_t>> deadlines_;
  std::set<std::string> changed_partitions_;
  bool all_changed_ = false;
  std::vector<uint64_t> fresh_;  // registered since the last round: tried once
  std::thread thread_;
};

}  // namespace seqflow::server
