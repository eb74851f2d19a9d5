// The allocator of large buffers, which keeps freed blocks for reuse. Fresh
// memory is expensive here: the kernel zeroes every page on first touch,
// and on a virtual machine the host may have to back it too (first touches
// of 288 MiB measured 25 ms to 750 ms). RL steps move the same shapes every
// step, so a put, a get or a gather usually finds a block of the size it
// needs among those the last step freed, already faulted in.
//
// Every block is sized to an eighth of its power of two, whole 2 MiB pages
// at most. Blocks of 2 MiB and more are 2 MiB-aligned and asked to be
// backed by huge pages, which cuts the page faults of filling them ~500x;
// smaller ones (the frames of a put's short runs of samples, say) are
// page-aligned. A freed block serves a later request of its size class
// (under 2 MiB) or of up to a quarter less (from 2 MiB on). The cache holds
// at most SEQFLOW_BLOCK_CACHE_MB MiB (environment, read once; default 2048;
// 0: off) and drops the blocks freed longest ago first. Thread-safe and
// fork-safe.
#pragma once

#include <cstddef>
#include <memory>

namespace seqflow {

class BlockCache {
 public:
  static constexpr size_t kAlignment = size_t{2} << 20;      // of blocks of kAlignment bytes and more
  static constexpr size_t kPageAlignment = size_t{4} << 10;  // of smaller ones

  // The capacity of a block for `size` bytes: `size` rounded up to an
  // eighth of its power of two (whole pages at least, whole 2 MiB pages at
  // most), which wastes at most an eighth. Throws std::bad_alloc on a size
  // too large to round up.
  static size_t capacity_for(size_t size);
  // Where a block of `capacity` bytes is aligned.
  static size_t alignment_of(size_t capacity) { return capacity >= kAlignment ? kAlignment : kPageAlignment; }

  // The process's cache, with the limit from the environment.
  static BlockCache& instance();
  // SEQFLOW_BLOCK_CACHE_MB's value in bytes: unset or empty gives the
  // default; anything but a number of MiB turns the cache off.
  static size_t limit_from(const char* mib_text);

  explicit BlockCache(size_t limit_bytes);
  ~BlockCache();  // frees the cached blocks
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // A block of at least `size` bytes: a cached one when one fits (of
  // capacity_for(size) under 2 MiB, else at most a quarter larger), else a
  // new one. `*capacity` is set to its size. Throws std::bad_alloc when
  // there is no such block (a size too large to round up included).
  std::byte* acquire(size_t size, size_t* capacity);
  // Keeps the block for reuse, or frees it when it exceeds the limit.
  void release(std::byte* block, size_t capacity);

  size_t cached_bytes() const;
  size_t limit() const { return limit_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  size_t limit_;
};

}  // namespace seqflow
