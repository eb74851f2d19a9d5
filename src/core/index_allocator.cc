#include "core/index_allocator.h"

#include "common/amortized_reserve.h"
#include "seqflow/error.h"

namespace seqflow::core {

IndexAllocator::IndexAllocator(uint64_t first_generation) : next_generation_(first_generation) {
  if (first_generation == 0) throw Error(ErrorCode::kInternal, "generations start at 1 or above");
}

bool IndexAllocator::is_live(int64_t index) const {
  const auto word = static_cast<size_t>(index) / 64;
  return word < live_bits_.size() && ((live_bits_[word] >> (index % 64)) & 1U) != 0;
}

void IndexAllocator::set_live(int64_t index, bool live) {
  const auto word = static_cast<size_t>(index) / 64;
  if (word >= live_bits_.size()) live_bits_.resize(word + 1, 0);
  const uint64_t bit = uint64_t{1} << (index % 64);
  if (live) {
    live_bits_[word] |= bit;
  } else {
    live_bits_[word] &= ~bit;
  }
  if (static_cast<size_t>(index) >= where_.size()) {
    where_.resize(static_cast<size_t>(index) + 1);
    generation_.resize(static_cast<size_t>(index) + 1);
  }
}

void IndexAllocator::reserve(int64_t count) {
  // Every index at or above high_water() is free: the largest one `count`
  // allocations can reach is below high_water() + count.
  const auto indexes = static_cast<size_t>(high_water() + count);
  amortized_reserve(live_bits_, (indexes + 63) / 64);
  amortized_reserve(where_, indexes);
  amortized_reserve(generation_, indexes);
}

std::vector<int64_t> IndexAllocator::allocate(int64_t count) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(count));
  int64_t index = lowest_free_;
  while (static_cast<int64_t>(out.size()) < count) {
    const auto word = static_cast<size_t>(index) / 64;
    if (word < live_bits_.size() && index % 64 == 0 && live_bits_[word] == ~uint64_t{0}) {
      index += 64;  // skip full words
      continue;
    }
    if (!is_live(index)) {
      set_live(index, true);
      generation_[static_cast<size_t>(index)] = next_generation_++;
      out.push_back(index);
    }
    ++index;
  }
  lowest_free_ = index;
  live_ += count;
  return out;
}

void IndexAllocator::bind(int64_t index, Location where) {
  if (!is_live(index)) {
    throw Error(ErrorCode::kInternal, "global index " + std::to_string(index) + " is not live");
  }
  where_[static_cast<size_t>(index)] = where;
}

bool IndexAllocator::claim(int64_t index, Location where, uint64_t generation) {
  if (index < 0 || is_live(index)) return false;
  set_live(index, true);
  where_[static_cast<size_t>(index)] = where;
  generation_[static_cast<size_t>(index)] = generation;
  ++live_;
  // lowest_free_ stays a lower bound: allocate skips live indexes.
  return true;
}

void IndexAllocator::release(int64_t index) {
  if (!is_live(index)) return;
  set_live(index, false);
  --live_;
  if (index < lowest_free_) lowest_free_ = index;
}

std::optional<Location> IndexAllocator::find(int64_t index) const {
  if (index < 0 || !is_live(index)) return std::nullopt;
  return where_[static_cast<size_t>(index)];
}

}  // namespace seqflow::core
