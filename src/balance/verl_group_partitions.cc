// verl's get_group_balanced_partitions: uids whole, the same number of uids
// per part, balanced by the uids' summed verl workloads.
#include <algorithm>
#include <string>
#include <unordered_map>

#include "common/checked_math.h"
#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace seqflow::balance {

namespace {

// verl's calculate_workload of one length, 24576 * L + L * L (negative
// lengths too, as verl takes them), refused where it leaves int64.
std::optional<int64_t> verl_workload(int64_t length) {
  constexpr int64_t kLinearCost = 24576;
  auto linear = checked_mul(kLinearCost, length);
  auto square = checked_mul(length, length);
  if (!linear || !square) return std::nullopt;
  return checked_add(*linear, *square);
}

}  // namespace

std::vector<std::vector<int64_t>> get_group_balanced_partitions(std::span<const int64_t> seqlens,
                                                                std::span<const int64_t> uids, int64_t k_partitions) {
  if (seqlens.size() != uids.size()) {
    throw_invalid("seqlen_list and uid_list must have the same length, got " + std::to_string(seqlens.size()) +
                  " and " + std::to_string(uids.size()));
  }
  if (k_partitions < 1) throw_invalid("k_partitions must be >= 1, got " + std::to_string(k_partitions));
  std::unordered_map<int64_t, int64_t> group_of;
  std::vector<std::vector<int64_t>> members;
  std::vector<int64_t> group_costs;
  for (size_t i = 0; i < uids.size(); ++i) {
    auto [found, added] = group_of.try_emplace(uids[i], static_cast<int64_t>(members.size()));
    if (added) {
      members.emplace_back();
      group_costs.push_back(0);
    }
    const auto group = static_cast<size_t>(found->second);
    members[group].push_back(static_cast<int64_t>(i));
    auto cost = verl_workload(seqlens[i]);
    auto sum = cost ? checked_add(group_costs[group], *cost) : std::nullopt;
    if (!sum) {
      throw_invalid("seqlen_list[" + std::to_string(i) + "] = " + std::to_string(seqlens[i]) +
                    ": the workload of its uid overflows int64");
    }
    group_costs[group] = *sum;
  }
  if (static_cast<int64_t>(members.size()) < k_partitions) {
    throw_invalid("uid_list has " + std::to_string(members.size()) + " distinct uids, fewer than k_partitions (" +
                  std::to_string(k_partitions) + "); use fewer partitions or a larger batch");
  }
  auto parts = get_seqlen_balanced_partitions(group_costs, k_partitions, true);
  for (auto& part : parts) {
    std::vector<int64_t> items;
    for (int64_t group : part) {
      const auto& of_group = members[static_cast<size_t>(group)];
      items.insert(items.end(), of_group.begin(), of_group.end());
    }
    std::sort(items.begin(), items.end());
    part = std::move(items);
  }
  return parts;
}

}  // namespace seqflow::balance
