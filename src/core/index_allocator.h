// Global indexes: unique among live samples of every partition, the smallest
// released index reused first, and where each live index lives.
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
  // `count` free indexes, smallest first, now live; bind() places each.
  std::vector<int64_t> allocate(int64_t count);
  // Binds a live index to its location (allocate marks it live, bind places it).
  void bind(int64_t index, Location where);
  // Marks a specific index live (checkpoint load); false if already live.
  bool claim(int64_t index, Location where);
  void release(int64_t index);

  std::optional<Location> find(int64_t index) const;
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
  int64_t lowest_free_ = 0;  // no free index below this
  int64_t live_ = 0;
};

}  // namespace seqflow::core
