// A phase-fair reader-writer lock: a waiting writer holds back new readers,
// and a writer's unlock admits every reader that waited for it before the
// next writer. std::shared_mutex (glibc's reader-first rwlock) starves puts
// under a stream of gets; a writer-first one starves gets. Works with
// std::unique_lock and std::shared_lock.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace seqflow::storage {

class FairSharedMutex {
 public:
  void lock();
  void unlock();
  void lock_shared();
  void unlock_shared();

 private:
  std::mutex mutex_;
  std::condition_variable readers_cv_;
  std::condition_variable writers_cv_;
  bool writing_ = false;
  size_t active_readers_ = 0;
  size_t waiting_readers_ = 0;
  size_t admitted_readers_ = 0;  // woken by the last unlock, not yet in
  size_t waiting_writers_ = 0;
  uint64_t writes_ = 0;  // completed writes: a reader's phase
};

}  // namespace seqflow::storage
