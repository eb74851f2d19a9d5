// verl's greedy_partition and get_group_balanced_partitions, against simple
// oracles written from verl's description, and their error cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "seqflow/balance.h"
#include "test_support.h"

namespace seqflow::balance {
namespace {

using test::Rng;
using test::throws_invalid;
using test::Weights;
using Parts = std::vector<std::vector<int64_t>>;

// verl's loop without a heap: scan every part for the smallest sum.
Parts greedy_by_scanning(const Weights& values, int64_t k, bool equal_size) {
  int64_t bias = 0;
  if (equal_size) {
    for (int64_t v : values) bias += v;
    bias += 1;
  }
  Parts parts(static_cast<size_t>(k));
  std::vector<int64_t> sums(static_cast<size_t>(k), 0);
  for (size_t i = 0; i < values.size(); ++i) {
    const auto lightest = static_cast<size_t>(std::min_element(sums.begin(), sums.end()) - sums.begin());
    parts[lightest].push_back(static_cast<int64_t>(i));
    sums[lightest] += values[i] + bias;
  }
  return parts;
}

TEST(VerlGreedyPartition, ByHand) {
  // 5 -> part 0; 3 -> part 1; 4 -> part 1 (3 < 5); 2 -> part 0 (5 < 7).
  EXPECT_EQ(greedy_partition(Weights{5, 3, 4, 2}, 2, false), (Parts{{0, 3}, {1, 2}}));
  // Ties go to the lower part: zeros never make part 0 heavier.
  EXPECT_EQ(greedy_partition(Weights{1, 1, 1}, 3, false), (Parts{{0}, {1}, {2}}));
  EXPECT_EQ(greedy_partition(Weights{0, 0, 0}, 3, false), (Parts{{0, 1, 2}, {}, {}}));
  EXPECT_EQ(greedy_partition(Weights{}, 2, false), (Parts{{}, {}}));
}

TEST(VerlGreedyPartition, MatchesAScanOnRandomInputs) {
  Rng rng(test::kSeed + 40);
  for (int round = 0; round < 500; ++round) {
    const size_t n = rng() % 40;
    const int64_t k = 1 + static_cast<int64_t>(rng() % 9);
    const Weights values = round % 2 ? test::uniform_lengths(rng, n, 0, 5) : test::uniform_lengths(rng, n, 0, 100000);
    for (bool equal_size : {false, true}) {
      if (equal_size && n % k != 0) continue;
      const Parts parts = greedy_partition(values, k, equal_size);
      EXPECT_EQ(parts, greedy_by_scanning(values, k, equal_size)) << "round " << round << " k=" << k;
      if (equal_size) {
        for (const auto& part : parts) EXPECT_EQ(part.size(), n / static_cast<size_t>(k));
      }
    }
  }
}

TEST(VerlGreedyPartition, BadInputNamesTheParameter) {
  const Weights three = {1, 2, 3};
  EXPECT_TRUE(throws_invalid([&] { greedy_partition(three, 0, false); }, {"k_partitions must be >= 1, got 0"}));
  EXPECT_TRUE(throws_invalid([&] { greedy_partition(three, -4, false); }, {"k_partitions", "-4"}));
  EXPECT_TRUE(throws_invalid([&] { greedy_partition(three, int64_t{1} << 40, false); },
                             {"k_partitions", std::to_string(int64_t{1} << 40)}));
  EXPECT_TRUE(throws_invalid([&] { greedy_partition(three, 2, true); }, {"equal_size", "(3)", "k_partitions (2)"}));
  EXPECT_TRUE(throws_invalid([&] { greedy_partition(Weights{INT64_MAX, 1}, 1, true); }, {"seqlen_list", "overflow"}));
  EXPECT_TRUE(throws_invalid([&] { greedy_partition(Weights{INT64_MAX, 1}, 1, false); }, {"seqlen_list", "overflow"}));
  // A negative item can leave counts uneven with equal_size: named, not returned.
  EXPECT_TRUE(throws_invalid([&] { greedy_partition(Weights{-100, 1, 1, 1}, 2, true); }, {"equal_size", "negative"}));
}

int64_t verl_workload(int64_t length) { return 24576 * length + length * length; }

TEST(VerlGroupBalancedPartitions, IsKarmarkarKarpOverSummedGroupWorkloads) {
  Rng rng(test::kSeed + 41);
  for (int round = 0; round < 300; ++round) {
    const size_t groups = 1 + rng() % 20;
    const int64_t k = 1 + static_cast<int64_t>(rng() % groups);
    // uids in any order and with any values: numbered by first appearance.
    std::vector<int64_t> uids;
    for (size_t g = 0; g < groups; ++g) {
      for (size_t s = 0, size = 1 + rng() % 4; s < size; ++s) uids.push_back(static_cast<int64_t>(g * 7919 % 1000));
    }
    if (round % 2) std::shuffle(uids.begin(), uids.end(), rng);
    const Weights lengths = test::uniform_lengths(rng, uids.size(), 0, 5000);
    std::vector<int64_t> first_seen;
    std::map<int64_t, Weights> members;
    std::map<int64_t, int64_t> cost_of;
    for (size_t i = 0; i < uids.size(); ++i) {
      if (!members.count(uids[i])) first_seen.push_back(uids[i]);
      members[uids[i]].push_back(static_cast<int64_t>(i));
      cost_of[uids[i]] += verl_workload(lengths[i]);
    }
    Weights group_costs;
    for (int64_t uid : first_seen) group_costs.push_back(cost_of[uid]);
    SCOPED_TRACE(::testing::Message() << "round " << round << " groups=" << groups << " k=" << k);
    if (groups % static_cast<size_t>(k) != 0) {
      EXPECT_TRUE(throws_invalid([&] { get_group_balanced_partitions(lengths, uids, k); },
                                 {"multiple of k_partitions (" + std::to_string(k) + ")"}));
      continue;
    }
    Parts expected;
    for (const auto& part : get_seqlen_balanced_partitions(group_costs, k, true)) {
      std::vector<int64_t> items;
      for (int64_t group : part) {
        const auto& of_group = members[first_seen[static_cast<size_t>(group)]];
        items.insert(items.end(), of_group.begin(), of_group.end());
      }
      std::sort(items.begin(), items.end());
      expected.push_back(items);
    }
    EXPECT_EQ(get_group_balanced_partitions(lengths, uids, k), expected);
  }
}

TEST(VerlGroupBalancedPartitions, BadInputNamesTheParameter) {
  const Weights two = {1, 2};
  EXPECT_TRUE(throws_invalid([&] { get_group_balanced_partitions(two, Weights{7}, 1); },
                             {"seqlen_list and uid_list", "got 2 and 1"}));
  EXPECT_TRUE(throws_invalid(
      [&] {
        get_group_balanced_partitions(two, Weights{7, 7}, 2);
      },
      {"uid_list has 1 distinct uids, fewer than k_partitions (2)"}));
  EXPECT_TRUE(throws_invalid(
      [&] {
        get_group_balanced_partitions(two, Weights{7, 8}, 0);
      },
      {"k_partitions must be >= 1, got 0"}));
  EXPECT_TRUE(throws_invalid(
      [&] {
        get_group_balanced_partitions(Weights{1, 2, 3}, Weights{1, 2, 3}, 2);
      },
      {"multiple of k_partitions (2)"}));
  // 24576 * L + L * L leaves int64 for L = 2^32: named with its index.
  EXPECT_TRUE(throws_invalid(
      [&] {
        get_group_balanced_partitions(Weights{1, int64_t{1} << 32}, Weights{1, 2}, 1);
      },
      {"seqlen_list[1]", "overflows int64"}));
  // Two lengths whose workloads fit but whose uid's sum does not.
  const int64_t big = 3'000'000'000;
  EXPECT_TRUE(throws_invalid(
      [&] {
        get_group_balanced_partitions(Weights{big, big}, Weights{5, 5}, 1);
      },
      {"seqlen_list[1]", "overflows int64"}));
}

}  // namespace
}  // namespace seqflow::balance
