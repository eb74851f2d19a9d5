#include "server/deferred_waiters.h"

#include <new>
#include <string_view>
#include <unordered_set>

namespace seqflow::server {

DeferredWaiters::DeferredWaiters(Controller& controller) : controller_(controller) {
  controller_.on_change([this](const std::string* partition_id) { changed(partition_id); });
  thread_ = std::thread(&DeferredWaiters::run, this);
}

DeferredWaiters::~DeferredWaiters() { stop(); }

void DeferredWaiters::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  controller_.on_change(nullptr);
  std::map<uint64_t, Waiter> left;
  {
    std::lock_guard lock(mutex_);
    left.swap(waiters_);
    by_partition_.clear();
    deadlines_.clear();
  }
  // `left` goes here, unlocked: its DeferredReplies take the service's lock.
}

void DeferredWaiters::wait(const std::string& partition_id, std::unique_ptr<Wait> wait, std::string identity,
                           Clock::time_point deadline) {
  uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    id = next_id_++;
  }
  // drop() comes from the I/O thread, as this call does: never before the
  // waiter below is registered.
  DeferredReply reply = defer_reply([this, id] { drop(id); });
  std::lock_guard lock(mutex_);
  if (stopping_) return;  // the reply is dropped: the service is stopping
  waiters_.emplace(
      id, Waiter{partition_id, std::shared_ptr<Wait>(std::move(wait)),
                 std::make_shared<const std::string>(std::move(identity)), Clock::now(), deadline, std::move(reply)});
  by_partition_[partition_id].insert(id);
  deadlines_.emplace(deadline, id);
  fresh_.push_back(id);
  wake_.notify_all();
}

void DeferredWaiters::changed(const std::string* partition_id) {
  {
    std::lock_guard lock(mutex_);
    if (waiters_.empty()) return;
    if (partition_id == nullptr) {
      all_changed_ = true;
    } else if (by_partition_.count(*partition_id) > 0) {
      try {
        changed_partitions_.insert(*partition_id);
      } catch (const std::bad_alloc&) {
        // Told after the change was made: never an error then, every waiter retries instead.
        all_changed_ = true;
      }
    } else {
      return;
    }
  }
  wake_.notify_all();
}

void DeferredWaiters::drop(uint64_t id) {
  std::optional<Waiter> dropped;
  {
    std::lock_guard lock(mutex_);
    dropped = take_locked(id);
  }
  // Destroyed here, unlocked: its DeferredReply takes the service's lock.
}

std::optional<DeferredWaiters::Waiter> DeferredWaiters::take_locked(uint64_t id) {
  const auto found = waiters_.find(id);
  if (found == waiters_.end()) return std::nullopt;
  Waiter waiter = std::move(found->second);
  waiters_.erase(found);
  deadlines_.erase({waiter.deadline, id});
  const auto partition = by_partition_.find(waiter.partition_id);
  partition->second.erase(id);
  if (partition->second.empty()) by_partition_.erase(partition);
  return waiter;
}

std::vector<DeferredWaiters::Attempt> DeferredWaiters::take_round(std::vector<std::pair<uint64_t, Waiter>>& expired) {
  const auto now = Clock::now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const uint64_t id = deadlines_.begin()->second;
    expired.emplace_back(id, std::move(*take_locked(id)));
  }
  std::set<uint64_t> ids;
  if (all_changed_) {
    for (const auto& entry : waiters_) ids.insert(entry.first);
  } else {
    for (const std::string& partition_id : changed_partitions_) {
      const auto found = by_partition_.find(partition_id);
      if (found != by_partition_.end()) ids.insert(found->second.begin(), found->second.end());
    }
    for (uint64_t id : fresh_) {
      if (waiters_.count(id) > 0) ids.insert(id);
    }
  }
  all_changed_ = false;
  changed_partitions_.clear();
  fresh_.clear();
  std::vector<Attempt> round;
  round.reserve(ids.size());
  for (uint64_t id : ids) {
    const Waiter& waiter = waiters_.at(id);
    round.push_back(Attempt{id, waiter.wait, waiter.identity});
  }
  return round;
}

void DeferredWaiters::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    const auto due = [this] {
      return stopping_ || all_changed_ || !changed_partitions_.empty() || !fresh_.empty() ||
             (!deadlines_.empty() && deadlines_.begin()->first <= Clock::now());
    };
    if (deadlines_.empty()) {
      wake_.wait(lock, due);
    } else {
      const Clock::time_point next_deadline = deadlines_.begin()->first;  // a copy: the set changes meanwhile
      wake_.wait_until(lock, next_deadline, due);
    }
    if (stopping_) return;
    std::vector<std::pair<uint64_t, Waiter>> expired;
    const std::vector<Attempt> round = take_round(expired);
    lock.unlock();

    for (auto& entry : expired) finish_at_deadline(entry.second);
    expired.clear();
    // Waiters that ask the same thing get the same answer: once one is not
    // ready, the rest of them are not either.
    std::unordered_set<std::string_view> not_ready;
    for (const Attempt& attempt : round) {
      if (not_ready.count(*attempt.identity) > 0) continue;
      std::optional<Answer> answer;
      try {
        answer = attempt.wait->attempt();
      } catch (const Error& failure) {
        answer = Answer{{}, failure, nullptr};
      } catch (const std::exception& failure) {
        answer =
            Answer{{}, Error(ErrorCode::kInternal, std::string("waiting request failed: ") + failure.what()), nullptr};
      }
      if (!answer) {
        not_ready.insert(*attempt.identity);
        continue;
      }
      std::optional<Waiter> waiter;
      {
        std::lock_guard hold(mutex_);
        waiter = take_locked(attempt.id);
      }
      if (waiter) {
        send(*waiter, std::move(*answer));
      } else if (answer->undelivered) {
        answer->undelivered();  // dropped meanwhile (its client is gone): nobody takes the answer
      }
    }
    lock.lock();
  }
}

void DeferredWaiters::send(Waiter& waiter, Answer answer) {
  if (answer.error) {
    waiter.reply.fail(answer.error->code(), answer.error->what());
  } else {
    waiter.reply.send(std::move(answer.reply), std::move(answer.undelivered));
  }
}

void DeferredWaiters::finish_at_deadline(Waiter& waiter) {
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - waiter.since);
  Answer answer;
  try {
    answer = waiter.wait->at_deadline(waited);
  } catch (const Error& error) {
    answer.error = error;
  } catch (const std::exception& error) {
    answer.error = Error(ErrorCode::kInternal, std::string("waiting request failed: ") + error.what());
  }
  send(waiter, std::move(answer));
}

}  // namespace seqflow::server
