#include "common/block_cache.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <new>
#include <vector>

namespace seqflow {

struct BlockCache::State {
  struct Block {
    std::byte* data;
    size_t capacity;
  };
  std::mutex mutex;
  std::list<Block> by_age;  // front: freed longest ago
  std::multimap<size_t, std::list<Block>::iterator> by_capacity;
  size_t bytes = 0;
};

namespace {

std::align_val_t block_alignment(size_t capacity) { return std::align_val_t{BlockCache::alignment_of(capacity)}; }

}  // namespace

size_t BlockCache::capacity_for(size_t size) {
  // Eighths from 2 MiB on too, up to whole 2 MiB pages from 16 MiB on:
  // ZeroMQ asks for a message's size plus its header, and whole pages made
  // the block of every 2 MiB frame (a put's block of samples) 4 MiB. A
  // block's tail past its last whole huge page gets small pages.
  const size_t step = std::clamp(std::bit_floor(size) / 8, kPageAlignment, kAlignment);
  // Rounding up must not wrap to a tiny block: ZeroMQ asks for sizes a peer wrote on the wire.
  if (size > SIZE_MAX - step + 1) throw std::bad_alloc();
  return (size + step - 1) / step * step;
}

size_t BlockCache::limit_from(const char* mib_text) {
  constexpr size_t kDefaultMiB = 2048;
  if (mib_text == nullptr || *mib_text == '\0') return kDefaultMiB << 20;
  if (*mib_text < '0' || *mib_text > '9') return 0;
  char* end = nullptr;
  errno = 0;
  const unsigned long long mib = std::strtoull(mib_text, &end, 10);
  // A malformed value must not cache without bound: it turns the cache off.
  if (*end != '\0' || errno != 0 || mib > (SIZE_MAX >> 20)) return 0;
  return static_cast<size_t>(mib) << 20;
}

BlockCache& BlockCache::instance() {
  // Never destroyed: buffers may be freed during static destruction.
  static BlockCache* cache = [] {
    auto* made = new BlockCache(limit_from(std::getenv("SEQFLOW_BLOCK_CACHE_MB")));
    // A fork while another thread holds the lock must not leave the child's copy locked.
    pthread_atfork([] { BlockCache::instance().state_->mutex.lock(); },
                   [] { BlockCache::instance().state_->mutex.unlock(); },
                   [] { BlockCache::instance().state_->mutex.unlock(); });
    return made;
  }();
  return *cache;
}

BlockCache::BlockCache(size_t limit_bytes) : state_(std::make_unique<State>()), limit_(limit_bytes) {}

BlockCache::~BlockCache() {
  for (const State::Block& block : state_->by_age) ::operator delete(block.data, block_alignment(block.capacity));
}

std::byte* BlockCache::acquire(size_t size, size_t* capacity) {
  const size_t rounded = capacity_for(size);
  {
    std::lock_guard lock(state_->mutex);
    const auto it = state_->by_capacity.lower_bound(rounded);
    // Under 2 MiB only a block of the size class: a kept message's block is then at most an eighth larger.
    const size_t slack = rounded < kAlignment ? 0 : rounded / 4;
    if (it != state_->by_capacity.end() && it->first - rounded <= slack) {
      const State::Block block = *it->second;
      state_->by_age.erase(it->second);
      state_->by_capacity.erase(it);
      state_->bytes -= block.capacity;
      *capacity = block.capacity;
      return block.data;
    }
  }
  auto* data = static_cast<std::byte*>(::operator new(rounded, block_alignment(rounded)));
  if (rounded >= kAlignment) madvise(data, rounded, MADV_HUGEPAGE);  // a hint: failure only costs speed
  *capacity = rounded;
  return data;
}

void BlockCache::release(std::byte* data, size_t capacity) {
  std::vector<State::Block> dropped;
  {
    std::lock_guard lock(state_->mutex);
    if (capacity <= limit_) {
      while (state_->bytes + capacity > limit_) {
        const State::Block oldest = state_->by_age.front();
        const auto range = state_->by_capacity.equal_range(oldest.capacity);
        for (auto it = range.first; it != range.second; ++it) {
          if (it->second == state_->by_age.begin()) {
            state_->by_capacity.erase(it);
            break;
          }
        }
        state_->by_age.pop_front();
        state_->bytes -= oldest.capacity;
        dropped.push_back(oldest);
      }
      state_->by_capacity.emplace(capacity, state_->by_age.insert(state_->by_age.end(), {data, capacity}));
      state_->bytes += capacity;
      data = nullptr;
    }
  }
  if (data != nullptr) dropped.push_back({data, capacity});
  for (const State::Block& block : dropped) ::operator delete(block.data, block_alignment(block.capacity));
}

size_t BlockCache::cached_bytes() const {
  std::lock_guard lock(state_->mutex);
  return state_->bytes;
}

}  // namespace seqflow
