// verl's greedy_partition, reproduced exactly: Python's unbounded sums become
// checked int64 sums.
#include <algorithm>
#include <functional>
#include <queue>
#include <string>
#include <utility>

#include "balance/verl_arguments.h"
#include "common/checked_math.h"
#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace seqflow::balance {

namespace {

int64_t checked_sum(int64_t a, int64_t b, size_t index) {
  auto sum = checked_add(a, b);
  if (!sum) throw_invalid("seqlen_list: the sums of lengths overflow int64 at index " + std::to_string(index));
  return *sum;
}

}  // namespace

std::vector<std::vector<int64_t>> greedy_partition(std::span<const int64_t> seqlens, int64_t k_partitions,
                                                   bool equal_size) {
  const auto n = static_cast<int64_t>(seqlens.size());
  if (k_partitions < 1) throw_invalid("k_partitions must be >= 1, got " + std::to_string(k_partitions));
  detail::check_partition_count(n, k_partitions, equal_size);
  int64_t bias = 0;
  if (equal_size) {
    for (size_t i = 0; i < seqlens.size(); ++i) bias = checked_sum(bias, seqlens[i], i);
    bias = checked_sum(bias, 1, seqlens.size());
  }
  std::vector<std::vector<int64_t>> parts(static_cast<size_t>(k_partitions));
  // (sum, part), lightest first; equal sums go to the lower part, as verl's heap does.
  using Load = std::pair<int64_t, int64_t>;
  std::priority_queue<Load, std::vector<Load>, std::greater<>> lightest;
  for (int64_t part = 0; part < k_partitions; ++part) lightest.emplace(0, part);
  for (size_t i = 0; i < seqlens.size(); ++i) {
    auto [total, part] = lightest.top();
    lightest.pop();
    parts[static_cast<size_t>(part)].push_back(static_cast<int64_t>(i));
    lightest.emplace(checked_sum(checked_sum(total, seqlens[i], i), bias, i), part);
  }
  if (equal_size) {
    size_t fewest = parts[0].size();
    size_t most = 0;
    for (const auto& part : parts) {
      fewest = std::min(fewest, part.size());
      most = std::max(most, part.size());
    }
    if (fewest != most) {
      throw_invalid("equal_size=True could not even out part sizes (" + std::to_string(fewest) + " to " +
                    std::to_string(most) + " items) because seqlen_list has negative values");
    }
  }
  return parts;
}

}  // namespace seqflow::balance
