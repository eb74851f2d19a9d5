// verl / TransferQueue's karmarkar_karp and get_seqlen_balanced_partitions,
// reproduced exactly, with errors where they would fail an assertion.
#include <algorithm>
#include <string>

#include "balance/largest_differencing.h"
#include "balance/verl_arguments.h"
#include "balance/value_order.h"
#include "common/checked_math.h"
#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace seqflow::balance {

namespace {

void check_magnitude(std::span<const int64_t> seqlens) {
  int64_t total = 0;
  for (size_t i = 0; i < seqlens.size(); ++i) {
    auto sum = seqlens[i] == INT64_MIN ? std::nullopt : checked_add(total, std::abs(seqlens[i]));
    if (!sum) {
      throw_invalid("seqlen_list: the sum of lengths overflows int64 at index " + std::to_string(i));
    }
    total = *sum;
  }
}

}  // namespace

void detail::check_partition_count(int64_t items, int64_t k_partitions, bool equal_size) {
  constexpr int64_t kMaxPartitions = int64_t{1} << 20;
  if (k_partitions > std::max(items, kMaxPartitions)) {
    throw_invalid("k_partitions (" + std::to_string(k_partitions) + ") exceeds both len(seqlen_list) (" +
                  std::to_string(items) + ") and " + std::to_string(kMaxPartitions) +
                  ": the parts beyond the items would all be empty");
  }
  if (equal_size && items % k_partitions != 0) {
    throw_invalid("equal_size=True needs len(seqlen_list) (" + std::to_string(items) +
                  ") to be a multiple of k_partitions (" + std::to_string(k_partitions) + ")");
  }
}

std::vector<std::vector<int64_t>> karmarkar_karp(std::span<const int64_t> seqlens, int64_t k_partitions,
                                                 bool equal_size) {
  const auto n = static_cast<int64_t>(seqlens.size());
  if (k_partitions <= 0) {
    throw_invalid("k_partitions must be positive, got " + std::to_string(k_partitions));
  }
  if (n == 0) throw_invalid("seqlen_list must not be empty");
  detail::check_partition_count(n, k_partitions, equal_size);
  check_magnitude(seqlens);
  auto start = equal_size ? detail::DifferencingStart::kSortedChunks : detail::DifferencingStart::kOneItemPerState;
  auto ascending = detail::order_by_value(seqlens, detail::Direction::kAscending);
  return detail::largest_differencing(seqlens, ascending, k_partitions, start).parts;
}

std::vector<std::vector<int64_t>> get_seqlen_balanced_partitions(std::span<const int64_t> seqlens, int64_t k_partitions,
                                                                 bool equal_size) {
  if (static_cast<int64_t>(seqlens.size()) < k_partitions) {
    throw_invalid("number of items (" + std::to_string(seqlens.size()) + ") < k_partitions (" +
                  std::to_string(k_partitions) + ")");
  }
  auto parts = karmarkar_karp(seqlens, k_partitions, equal_size);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) {
      throw_invalid("partition " + std::to_string(i) + " of " + std::to_string(k_partitions) +
                    " came out empty; balance with seqflow.balance.partition(..., "
                    "cardinality='balanced') instead");
    }
    std::sort(parts[i].begin(), parts[i].end());
  }
  return parts;
}

}  // namespace seqflow::balance
