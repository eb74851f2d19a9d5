// Item indexes sorted by value, ties by index: the order every balancing
// algorithm starts from, so it must be fast for a million items.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace seqflow::balance::detail {

enum class Direction { kAscending, kDescending };

// Ascending: by (value, index). Descending: by value descending, then index
// ascending. Values may be negative.
std::vector<int64_t> order_by_value(std::span<const int64_t> values, Direction direction);

}  // namespace seqflow::balance::detail
