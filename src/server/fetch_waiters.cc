#include "server/fetch_waiters.h"

#include <new>

#include <unordered_set>

#include "seqflow/error.h"
#include "transport/wire_codec.h"

namespace seqflow::server {
std::function<void()> giving_back(Controller& controller, const MetaRequest& request, const BatchMeta& meta,
                                  bool returnable) {
  if (!returnable || request.mode != MetaMode::kFetch || meta.size() == 0) return nullptr;
  return [&controller, partition = request.partition_id, task = request.task_name, indexes = meta.global_indexes,
          generations = meta.generations,
          lease = meta.lease] { controller.give_back(partition, task, indexes, generations, lease); };
}

FetchWaiters::FetchWaiters(Controller& controller) : controller_(controller) {
  controller_.on_change([this](const std::string* partition_id) { changed(partition_id); });
  thread_ = std::thread(&FetchWaiters::run, this);
}

FetchWaiters::~FetchWaiters() { stop(); }

void FetchWaiters::stop() {
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

void FetchWaiters::wait(MetaRequest request, std::string identity, Clock::time_point deadline) {
  uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    id = next_id_++;
  }
  // drop() comes from the I/O thread, as this call does: never before the
  // waiter below is registered.
  DeferredReply reply = defer_reply([this, id] { drop(id); });
  const std::string partition_id = request.partition_id;
  std::lock_guard lock(mutex_);
  if (stopping_) return;  // the reply is dropped: the service is stopping
  waiters_.emplace(
      id, Waiter{std::make_shared<const MetaRequest>(std::move(request)),
                 std::make_shared<const std::string>(std::move(identity)), Clock::now(), deadline, std::move(reply)});
  by_partition_[partition_id].insert(id);
  deadlines_.emplace(deadline, id);
  fresh_.push_back(id);
  wake_.notify_all();
}

void FetchWaiters::changed(const std::string* partition_id) {
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

void FetchWaiters::drop(uint64_t id) {
  std::optional<Waiter> dropped;
  {
    std::lock_guard lock(mutex_);
    dropped = take_locked(id);
  }
  // Destroyed here, unlocked: its DeferredReply takes the service's lock.
}

std::optional<FetchWaiters::Waiter> FetchWaiters::take_locked(uint64_t id) {
  const auto found = waiters_.find(id);
  if (found == waiters_.end()) return std::nullopt;
  Waiter waiter = std::move(found->second);
  waiters_.erase(found);
  deadlines_.erase({waiter.deadline, id});
  const auto partition = by_partition_.find(waiter.request->partition_id);
  partition->second.erase(id);
  if (partition->second.empty()) by_partition_.erase(partition);
  return waiter;
}

std::vector<FetchWaiters::Attempt> FetchWaiters::take_round(std::vector<std::pair<uint64_t, Waiter>>& expired) {
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
    round.push_back(Attempt{id, waiter.request, waiter.identity});
  }
  return round;
}

void FetchWaiters::run() {
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
      std::optional<BatchMeta> meta;
      std::optional<Error> error;
      bool returnable = false;
      try {
        meta = controller_.try_get_meta(*attempt.request, &returnable);
      } catch (const Error& failure) {
        error = failure;
      } catch (const std::exception& failure) {
        error = Error(ErrorCode::kInternal, std::string("get_meta failed: ") + failure.what());
      }
      if (!meta && !error) {
        not_ready.insert(*attempt.identity);
        continue;
      }
      std::optional<Waiter> waiter;
      {
        std::lock_guard hold(mutex_);
        waiter = take_locked(attempt.id);
      }
      if (error) {
        if (waiter) waiter->reply.fail(error->code(), error->what());
        continue;
      }
      if (waiter) {
        answer(*waiter, std::move(*meta), returnable);
      } else if (auto undo = giving_back(controller_, *attempt.request, *meta, returnable)) {
        undo();  // dropped meanwhile (its client is gone): nobody takes the batch
      }
    }
    lock.lock();
  }
}

void FetchWaiters::answer(Waiter& waiter, BatchMeta meta, bool returnable) {
  std::function<void()> undo = giving_back(controller_, *waiter.request, meta, returnable);
  waiter.reply.send(transport::wire::header_message(transport::wire::batch_meta_frame(meta)), std::move(undo));
}

void FetchWaiters::finish_at_deadline(Waiter& waiter) {
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - waiter.since);
  try {
    bool returnable = false;
    BatchMeta meta = controller_.get_meta_at_deadline(*waiter.request, waited, &returnable);
    answer(waiter, std::move(meta), returnable);
  } catch (const Error& error) {
    waiter.reply.fail(error.code(), error.what());
  } catch (const std::exception& error) {
    waiter.reply.fail(ErrorCode::kInternal, std::string("get_meta failed: ") + error.what());
  }
}

}  // namespace seqflow::server
