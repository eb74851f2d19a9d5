// Requests of the controller service that wait without a thread each: a
// get_meta that cannot be answered yet, a watch with no change yet. Each is
// a registered waiter (its Wait, its DeferredReply, its deadline). One
// thread retries the waiters of a partition when the controller reports a
// change in it, answers them, and gives each its last answer at its
// deadline; a waiter whose client's connection closed is dropped. 10,000
// waiters cost their requests' memory.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "seqflow/controller.h"
#include "seqflow/error.h"
#include "server/service.h"
#include "transport/frames.h"

namespace seqflow::server {

class DeferredWaiters {
 public:
  using Clock = std::chrono::steady_clock;

  // A waiter's reply: frames, or an error.
  struct Answer {
    transport::Frames reply;
    std::optional<Error> error;
    // Runs when the reply reaches nobody (its client left, also before it
    // was sent): undoes what answering took (a fetch's consumption).
    std::function<void()> undelivered;
  };

  // What one kind of waiting request does. Called on the waiters' thread,
  // outside their lock; the controller may be called.
  class Wait {
   public:
    virtual ~Wait() = default;
    // The answer if there is one now; nullopt: keep waiting.
    virtual std::optional<Answer> attempt() = 0;
    // The last answer, at the deadline, after waiting `waited`.
    virtual Answer at_deadline(std::chrono::milliseconds waited) = 0;
  };

  // Listens to `controller`'s changes (Controller::on_change) from here on
  // and starts the thread.
  explicit DeferredWaiters(Controller& controller);
  ~DeferredWaiters();  // stop()
  DeferredWaiters(const DeferredWaiters&) = delete;
  DeferredWaiters& operator=(const DeferredWaiters&) = delete;

  // Inside an InlineHandler whose request cannot be answered yet: defers
  // the request's reply (defer_reply) and retries `wait` on every change of
  // `partition_id` until `deadline`. `identity` is the request's encoding:
  // waiters with the same one get the same answer, so once one of them is
  // not ready the others are not tried on that change.
  void wait(const std::string& partition_id, std::unique_ptr<Wait> wait, std::string identity,
            Clock::time_point deadline);

  // Joins the thread and stops listening; waiters left get no reply (their
  // service is stopping, their clients time out). Idempotent.
  void stop();

 private:
  // Shared, not copied, with a round that runs outside the lock.
  struct Waiter {
    std::string partition_id;
    std::shared_ptr<Wait> wait;
    std::shared_ptr<const std::string> identity;
    Clock::time_point since;
    Clock::time_point deadline;
    DeferredReply reply;
  };
  struct Attempt {
    uint64_t id = 0;
    std::shared_ptr<Wait> wait;
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
  // Outside mutex_.
  static void send(Waiter& waiter, Answer answer);
  static void finish_at_deadline(Waiter& waiter);

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
