#include "balance/value_order.h"

#include <algorithm>
#include <bit>
#include <numeric>

namespace seqflow::balance::detail {

namespace {

constexpr int kDigitBits = 11;
constexpr uint64_t kDigitMask = (uint64_t{1} << kDigitBits) - 1;

// LSD radix sort of keys on their low `bits` bits.
void radix_sort(std::vector<uint64_t>& keys, int bits) {
  std::vector<uint64_t> scratch(keys.size());
  std::vector<size_t> offsets(kDigitMask + 2);
  for (int shift = 0; shift < bits; shift += kDigitBits) {
    std::fill(offsets.begin(), offsets.end(), 0);
    for (uint64_t key : keys) ++offsets[((key >> shift) & kDigitMask) + 1];
    std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
    for (uint64_t key : keys) scratch[offsets[(key >> shift) & kDigitMask]++] = key;
    keys.swap(scratch);
  }
}

}  // namespace

std::vector<int64_t> order_by_value(std::span<const int64_t> values, Direction direction) {
  const size_t n = values.size();
  std::vector<int64_t> order(n);
  if (n == 0) return order;
  auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  const uint64_t range = static_cast<uint64_t>(*hi) - static_cast<uint64_t>(*lo);
  const int index_bits = std::bit_width(static_cast<uint64_t>(n - 1));
  const int value_bits = std::bit_width(range);
  const bool descending = direction == Direction::kDescending;
  if (index_bits + value_bits <= 64) {
    // One packed key per item: (rank of value) << index_bits | index.
    std::vector<uint64_t> keys(n);
    for (size_t i = 0; i < n; ++i) {
      uint64_t rank = descending ? static_cast<uint64_t>(*hi) - static_cast<uint64_t>(values[i])
                                 : static_cast<uint64_t>(values[i]) - static_cast<uint64_t>(*lo);
      keys[i] = (index_bits == 0 ? 0 : rank << index_bits) | i;
    }
    radix_sort(keys, index_bits + value_bits);
    const uint64_t mask = index_bits == 0 ? 0 : (~uint64_t{0} >> (64 - index_bits));
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(keys[i] & mask);
    return order;
  }
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (values[a] != values[b]) return descending ? values[a] > values[b] : values[a] < values[b];
    return a < b;
  });
  return order;
}

}  // namespace seqflow::balance::detail
