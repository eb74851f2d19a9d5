// verl's rearrange_micro_batches plan (pack.h's verl_micro_batches): its
// guarantees, ranks that agree in three steps, the halving fallback, and
// every refusal of bad options and of agreed values that do not add up.
#include <gtest/gtest.h>

#include <algorithm>

#include "pack/halve_to_count.h"
#include "seqflow/balance.h"
#include "seqflow/pack.h"
#include "test_support.h"

namespace seqflow::pack {
namespace {

using test::Rng;
using test::throws_invalid;
using test::Weights;
using Parts = std::vector<std::vector<int64_t>>;

int64_t verl_cost(int64_t length) { return 24576 * length + length * length; }

int64_t sum_over(const std::vector<int64_t>& rows, const Weights& values) {
  int64_t sum = 0;
  for (int64_t row : rows) sum += values[static_cast<size_t>(row)];
  return sum;
}

// The plan as the ranks combine it: max of lower, longest, planned; min of
// groups; min of each fit.
std::vector<Parts> plans_of_agreeing_ranks(const std::vector<Weights>& ranks, const VerlMicroBatchOptions& options) {
  VerlMicroBatchNeeds agreed{0, 0, 0, INT64_MAX};
  for (const auto& lengths : ranks) {
    const auto needs = verl_micro_batch_needs(lengths, options);
    agreed.lower = std::max(agreed.lower, needs.lower);
    agreed.longest = std::max(agreed.longest, needs.longest);
    agreed.planned = std::max(agreed.planned, needs.planned);
    agreed.groups = std::min(agreed.groups, needs.groups);
  }
  std::vector<int64_t> fits;
  for (const auto& lengths : ranks) {
    const auto own = verl_split_fits(lengths, options, agreed);
    if (fits.empty()) fits = own;
    EXPECT_EQ(own.size(), fits.size());
    for (size_t j = 0; j < fits.size(); ++j) fits[j] = std::min(fits[j], own[j]);
  }
  std::vector<Parts> plans;
  for (const auto& lengths : ranks) plans.push_back(verl_micro_batches(lengths, options, agreed, fits));
  return plans;
}

void expect_guarantees(const Parts& plan, const Weights& lengths, const VerlMicroBatchOptions& options) {
  test::expect_covers_each_index_once(plan, lengths.size());
  const auto needs = verl_micro_batch_needs(lengths, options);
  const auto count = static_cast<int64_t>(plan.size());
  EXPECT_GE(count, needs.lower);
  EXPECT_EQ(count % options.count_multiple, 0);
  EXPECT_LE(count, std::max(needs.lower, needs.planned) + options.count_multiple) << "more than the planner needs";
  for (const auto& rows : plan) {
    EXPECT_FALSE(rows.empty());
    EXPECT_LE(sum_over(rows, lengths), options.max_token_len);
    EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
    for (size_t r = 0; r < rows.size(); ++r) {  // whole groups, in order
      EXPECT_EQ(rows[r] % options.force_group_size, static_cast<int64_t>(r) % options.force_group_size);
    }
  }
}

VerlMicroBatchOptions random_options(Rng& rng) {
  VerlMicroBatchOptions options;
  options.max_token_len = 600 + static_cast<int64_t>(rng() % 2000);
  options.force_group_size = 1 + static_cast<int64_t>(rng() % 3);
  options.min_count = static_cast<int64_t>(rng() % 4);
  options.count_multiple = 1 + static_cast<int64_t>(rng() % 3);
  options.balance_order = rng() % 2 == 0;
  return options;
}

Weights random_lengths(Rng& rng, const VerlMicroBatchOptions& options) {
  const size_t groups = 4 + rng() % 40;
  return test::uniform_lengths(rng, groups * static_cast<size_t>(options.force_group_size), 0,
                               options.max_token_len / options.force_group_size);
}

TEST(VerlMicroBatches, GuaranteesHoldAndAloneIsTheThreeStepsForOneRank) {
  Rng rng(test::kSeed + 50);
  for (int round = 0; round < 150; ++round) {
    const auto options = random_options(rng);
    const Weights lengths = random_lengths(rng, options);
    SCOPED_TRACE(::testing::Message() << "round " << round);
    Parts alone;
    try {
      alone = verl_micro_batches(lengths, options);
    } catch (const Error& error) {  // e.g. more micro-batches than groups: refused both ways alike
      EXPECT_TRUE(throws_invalid([&] { plans_of_agreeing_ranks({lengths}, options); }, {error.what()}));
      continue;
    }
    expect_guarantees(alone, lengths, options);
    EXPECT_EQ(plans_of_agreeing_ranks({lengths}, options)[0], alone);
  }
}

TEST(VerlMicroBatches, IsVerlsSplitAtTheLowestCountWhereThatFits) {
  // Equal lengths: verl's split at ceil(tokens / cap) = 3 fits, so the plan is
  // get_seqlen_balanced_partitions of the workloads at 3, sorted.
  const Weights lengths(9, 100);
  VerlMicroBatchOptions options;
  options.max_token_len = 300;
  options.balance_order = false;
  std::vector<int64_t> costs;
  for (int64_t length : lengths) costs.push_back(verl_cost(length));
  EXPECT_EQ(verl_micro_batches(lengths, options), balance::get_seqlen_balanced_partitions(costs, 3, false));
}

TEST(VerlMicroBatches, BalanceOrderPutsTheHeaviestInTheMiddle) {
  Rng rng(test::kSeed + 51);
  for (int round = 0; round < 100; ++round) {
    auto options = random_options(rng);
    options.min_count = 5;
    options.force_group_size = 1;
    const Weights lengths = test::uniform_lengths(rng, 40, 0, options.max_token_len);
    options.balance_order = false;
    Parts planned = verl_micro_batches(lengths, options);
    options.balance_order = true;
    const Parts ordered = verl_micro_batches(lengths, options);
    ASSERT_TRUE(std::is_permutation(ordered.begin(), ordered.end(), planned.begin(), planned.end()));
    std::vector<int64_t> costs;
    for (int64_t length : lengths) costs.push_back(verl_cost(length));
    std::vector<int64_t> workloads;
    for (const auto& rows : ordered) workloads.push_back(sum_over(rows, costs));
    const auto peak = static_cast<size_t>(std::max_element(workloads.begin(), workloads.end()) - workloads.begin());
    EXPECT_EQ(peak, (workloads.size() + 1) / 2 - 1);
    EXPECT_TRUE(std::is_sorted(workloads.begin(), workloads.begin() + static_cast<std::ptrdiff_t>(peak) + 1));
    EXPECT_TRUE(std::is_sorted(workloads.rbegin(), workloads.rend() - static_cast<std::ptrdiff_t>(peak)));
  }
}

TEST(VerlMicroBatches, AgreeingRanksGetOneCount) {
  Rng rng(test::kSeed + 52);
  int took_a_higher_count = 0;
  for (int round = 0; round < 100; ++round) {
    auto options = random_options(rng);
    options.min_count = 0;
    const Weights short_lengths = test::uniform_lengths(rng, 48 * static_cast<size_t>(options.force_group_size), 0,
                                                        options.max_token_len / 8 / options.force_group_size);
    const Weights long_lengths = random_lengths(rng, options);
    const auto plans = plans_of_agreeing_ranks({short_lengths, long_lengths}, options);
    ASSERT_EQ(plans[0].size(), plans[1].size()) << "round " << round;
    expect_guarantees(plans[1], long_lengths, options);
    test::expect_covers_each_index_once(plans[0], short_lengths.size());
    took_a_higher_count += plans[0].size() > verl_micro_batches(short_lengths, options).size();
  }
  EXPECT_GT(took_a_higher_count, 0) << "the short rank never took the long rank's count";
}

TEST(VerlMicroBatches, HalvingAPlanKeepsTheCap) {
  // The fallback where verl's split at the agreed count breaks the cap: the
  // planner's plan, empty micro-batches dropped, the costliest halved.
  const Weights tokens = {50, 50, 30, 30, 20, 10, 5};
  std::vector<int64_t> costs;
  for (int64_t length : tokens) costs.push_back(verl_cost(length));
  const Parts plan = {{0, 4, 6}, {}, {1, 2, 3, 5}};
  for (int64_t count = 2; count <= 7; ++count) {
    const Parts parts = detail::halve_to_count(plan, count, costs);
    ASSERT_EQ(static_cast<int64_t>(parts.size()), count);
    test::expect_covers_each_index_once(parts, tokens.size());
    for (const auto& part : parts) {
      EXPECT_FALSE(part.empty());
      EXPECT_LE(sum_over(part, tokens), 130);
    }
  }
  // The costliest (120 tokens) is halved first, evenly: 50 + 10 and 30 + 30.
  const Parts three = detail::halve_to_count(plan, 3, costs);
  EXPECT_EQ(three[0], (std::vector<int64_t>{0, 4, 6}));
  EXPECT_EQ(sum_over(three[1], tokens), 60);
  EXPECT_EQ(sum_over(three[2], tokens), 60);
  EXPECT_TRUE(throws_invalid([&] { detail::halve_to_count(plan, 8, costs); }, {"count (8)"}));
}

TEST(VerlMicroBatches, BadOptionsNameTheParameter) {
  const Weights three = {10, 20, 30};
  const auto with = [](auto change) {
    VerlMicroBatchOptions options;
    options.max_token_len = 64;
    change(options);
    return options;
  };
  const auto refused = [&](const Weights& lengths, const VerlMicroBatchOptions& options,
                           std::initializer_list<std::string_view> fragments) {
    EXPECT_TRUE(throws_invalid([&] { verl_micro_batches(lengths, options); }, fragments));
    EXPECT_TRUE(throws_invalid([&] { verl_micro_batch_needs(lengths, options); }, fragments));
  };
  refused(three, with([](auto& o) { o.max_token_len = 0; }), {"max_token_len must be >= 1, got 0"});
  refused(three, with([](auto& o) { o.force_group_size = 0; }), {"force_group_size must be >= 1, got 0"});
  refused(three, with([](auto& o) { o.min_count = -1; }), {"min_num_micro_batch must be >= 0, got -1"});
  refused(three, with([](auto& o) { o.count_multiple = 0; }), {"num_batches_divided_by must be >= 1, got 0"});
  refused(three, with([](auto& o) { o.min_count = INT64_MAX; }), {"min_num_micro_batch", std::to_string(INT64_MAX)});
  refused(three, with([](auto& o) { o.count_multiple = INT64_MAX; }), {"num_batches_divided_by"});
  refused(three, with([](auto& o) { o.force_group_size = 2; }), {"batch size 3", "force_group_size (2)"});
  refused(Weights{}, with([](auto&) {}), {"lengths", "empty"});
  refused(Weights{10, -1}, with([](auto&) {}), {"lengths[1] = -1"});
  refused(Weights{10, int64_t{1} << 40}, with([](auto&) {}), {"lengths[1]", "overflow"});
  // A group longer than the cap, and more micro-batches than groups.
  EXPECT_TRUE(throws_invalid(
      [&] {
        verl_micro_batches(Weights{40, 40, 10, 10}, with([](auto& o) { o.force_group_size = 2; }));
      },
      {"max_token_len (64)", "80 tokens"}));
  EXPECT_TRUE(throws_invalid([&] { verl_micro_batches(three, with([](auto& o) { o.min_count = 5; })); },
                             {"5 micro-batches are needed", "only 3 samples"}));
}

TEST(VerlMicroBatches, AgreedValuesThatDoNotAddUpAreRefused) {
  const Weights lengths = {10, 20, 30, 40};
  VerlMicroBatchOptions options;
  options.max_token_len = 64;
  const auto own = verl_micro_batch_needs(lengths, options);
  const auto fits = verl_split_fits(lengths, options, own);
  ASSERT_EQ(verl_micro_batches(lengths, options, own, fits), verl_micro_batches(lengths, options));
  const auto agreed = [&](auto change) {
    auto needs = own;
    change(needs);
    return needs;
  };
  const auto refused = [&](const VerlMicroBatchNeeds& needs, std::initializer_list<std::string_view> fragments) {
    EXPECT_TRUE(throws_invalid([&] { verl_split_fits(lengths, options, needs); }, fragments));
    EXPECT_TRUE(throws_invalid([&] { verl_micro_batches(lengths, options, needs, fits); }, fragments));
  };
  refused(agreed([](auto& n) { n.lower = 0; }), {"agreed lower must be >= 1, got 0"});
  refused(agreed([](auto& n) { n.lower = INT64_MAX; }), {"agreed lower", std::to_string(INT64_MAX)});
  refused(agreed([](auto& n) { n.planned = -3; }), {"agreed planned must be >= 0, got -3"});
  refused(agreed([](auto& n) { n.planned = INT64_MAX; }), {"agreed planned", std::to_string(INT64_MAX)});
  refused(agreed([](auto& n) { n.groups = 5; }), {"agreed groups", "at most 4, got 5"});
  refused(agreed([](auto& n) { n.groups = 0; }), {"agreed groups must be >= 1, got 0"});
  refused(agreed([](auto& n) { n.longest = 39; }), {"agreed longest", ">= 40, got 39"});
  refused(agreed([](auto& n) { n.longest = 65; }), {"max_token_len (64)", "65 tokens"});
  // The fits: one entry per count tried, 0 or 1, and a 1 only where the split fits here.
  const auto wide = agreed([](auto& n) { n.planned = 4; });
  const auto tried = verl_split_fits(lengths, options, wide);
  ASSERT_FALSE(tried.empty());
  std::vector<int64_t> too_many = tried;
  too_many.push_back(0);
  EXPECT_TRUE(throws_invalid([&] { verl_micro_batches(lengths, options, wide, too_many); },
                             {"agreed_fits has " + std::to_string(too_many.size()) + " entries"}));
  std::vector<int64_t> two = tried;
  two[0] = 2;
  EXPECT_TRUE(throws_invalid([&] { verl_micro_batches(lengths, options, wide, two); }, {"agreed_fits[0] = 2"}));
  // One micro-batch of 100 tokens breaks the cap of 64: claiming it fits is refused.
  const auto one = agreed([](auto& n) {
    n.lower = 1;
    n.planned = 4;
  });
  const auto at_one = verl_split_fits(lengths, options, one);
  ASSERT_EQ(at_one[0], 0);
  std::vector<int64_t> lie = at_one;
  lie[0] = 1;
  EXPECT_TRUE(
      throws_invalid([&] { verl_micro_batches(lengths, options, one, lie); }, {"agreed_fits[0] = 1", "max_token_len"}));
}

}  // namespace
}  // namespace seqflow::pack
