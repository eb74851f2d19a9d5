// Global indexes: unique among live samples of every partition, the smallest
// released index reused first, where each live index lives, and its
// generation: a number that changes whenever the index is handed out, so a
// BatchMeta kept across a reuse is told from the new sample's.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace seqflow::core {

// Where a live global index lives: a partition (by its number) and a slot in it.
struct Location {
  uint32_t partition = 0;
  uint32_t slot = 0;
};

class IndexAllocator {
 public:
  // Generations count up from `first_generation` (at least 1: 0 means "not
  // known" in a BatchMeta).
  explicit IndexAllocator(uint64_t first_generation);

  // `count` free indexes, smallest first, now live, each with the next
  // generation; bind() places each.
  std::vector<int64_t> allocate(int64_t count);
  // Makes room for `count` more indexes, so that allocating them (and
  // binding them) cannot fail: a failed insert must change nothing.
  void reserve(int64_t count);
  // Binds a live index to its location (allocate marks it live, bind places it).
  void bind(int64_t index, Location where);
  // Marks a specific index live with its generation (checkpoint load); false
  // if already live.
  bool claim(int64_t index, Location where, uint64_t generation);
  void release(int64_t index);

  std::optional<Location> find(int64_t index) const;
  // The generation of a live index.
  uint64_t generation(int64_t index) const { return generation_[static_cast<size_t>(index)]; }
  // The generation the next allocated index gets; checkpoints keep it.
  uint64_t next_generation() const { return next_generation_; }
  void set_next_generation(uint64_t next) { next_generation_ = next; }
  // A number of the same sequence that no index gets: unique, above every
  // generation and version handed out before (also across checkpoint loads).
  uint64_t take_generation() { return next_generation_++; }
  int64_t live_count() const { return live_; }
  // One past the largest index ever handed out.
  int64_t high_water() const { return static_cast<int64_t>(where_.size()); }

 private:
  bool is_live(int64_t index) const;
  void set_live(int64_t index, bool live);

  // Bit per index: live or free. A bitmap keeps a million released indexes
  // at 125 KB where an ordered set would take tens of MB.
  std::vector<uint64_t> live_bits_;
  std::vector<Location> where_;
  std::vector<uint64_t> generation_;
  uint64_t next_generation_;
  int64_t lowest_free_ = 0;  // no free index below this
  int64_t live_ = 0;
};

}  // namespace seqflow::core
