// StorageUnit's phase-fair reader-writer lock: readers and writers alternate
// under contention, so neither puts nor gets can be starved.
#include "storage/fair_shared_mutex.h"

namespace seqflow::storage {

void FairSharedMutex::lock_shared() {
  std::unique_lock lock(mutex_);
  if (!writing_ && waiting_writers_ == 0) {
    ++active_readers_;
    return;
  }
  // Wait for the end of the next write: its unlock admits this reader even
  // when more writers queue up meanwhile.
  ++waiting_readers_;
  const uint64_t phase = writes_;
  readers_cv_.wait(lock, [&] { return !writing_ && (waiting_writers_ == 0 || writes_ != phase); });
  --waiting_readers_;
  if (writes_ != phase) --admitted_readers_;
  ++active_readers_;
}

void FairSharedMutex::unlock_shared() {
  std::unique_lock lock(mutex_);
  --active_readers_;
  const bool wake_writer = active_readers_ == 0 && admitted_readers_ == 0 && waiting_writers_ > 0;
  lock.unlock();
  if (wake_writer) writers_cv_.notify_one();
}

void FairSharedMutex::lock() {
  std::unique_lock lock(mutex_);
  ++waiting_writers_;
  writers_cv_.wait(lock, [&] { return !writing_ && active_readers_ == 0 && admitted_readers_ == 0; });
  --waiting_writers_;
  writing_ = true;
}

void FairSharedMutex::unlock() {
  std::unique_lock lock(mutex_);
  writing_ = false;
  ++writes_;
  admitted_readers_ = waiting_readers_;
  const bool wake_readers = admitted_readers_ > 0;
  lock.unlock();
  // Readers that waited go first; writers follow when the last of them leaves.
  if (wake_readers) {
    readers_cv_.notify_all();
  } else {
    writers_cv_.notify_one();
  }
}

}  // namespace seqflow::storage
