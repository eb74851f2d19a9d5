#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "seqflow/error.h"
#include "seqflow/pack.h"
#include "pack/plan_stats.h"
#include "test_support.h"

namespace seqflow::pack {
namespace {

std::vector<int64_t> random_lengths(std::mt19937_64& rng, int64_t n, int64_t lo, int64_t hi) {
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (auto& v : out) v = dist(rng);
  return out;
}

// Rollout-like lengths: a prompt of 100-1500 tokens plus a lognormal response.
std::vector<int64_t> rollout_lengths(std::mt19937_64& rng, int64_t n, int64_t cap) {
  std::uniform_int_distribution<int64_t> prompt(100, 1500);
  std::lognormal_distribution<double> response(7.0, 1.0);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (auto& v : out) v = std::min<int64_t>(prompt(rng) + static_cast<int64_t>(response(rng)), cap);
  return out;
}

// Every guarantee of plan(), checked on one result.
void expect_guarantees(const Plan& plan, std::span<const int64_t> lengths, const Options& options) {
  ASSERT_EQ(static_cast<int64_t>(plan.packs.size()), options.dp_size);
  std::vector<int> seen(lengths.size(), 0);
  std::map<int64_t, std::pair<size_t, size_t>> group_place;
  int64_t padding = 0;
  for (size_t rank = 0; rank < plan.packs.size(); ++rank) {
    ASSERT_EQ(static_cast<int64_t>(plan.packs[rank].size()), options.optimizer_steps);
    for (size_t step = 0; step < plan.packs[rank].size(); ++step) {
      const auto& packs = plan.packs[rank][step];
      ASSERT_GE(packs.size(), 1u);
      ASSERT_EQ(packs.size(), plan.packs[0][step].size()) << "rank " << rank << " step " << step;
      for (size_t slot = 0; slot < packs.size(); ++slot) {
        const Pack& pack = packs[slot];
        int64_t tokens = 0;
        for (int64_t s : pack.samples) {
          ++seen.at(s);
          tokens += lengths[s];
          if (!options.groups.empty()) {
            auto [it, inserted] = group_place.try_emplace(options.groups[s], rank, step);
            EXPECT_EQ(it->second, std::make_pair(rank, step)) << "group " << options.groups[s];
          }
        }
        EXPECT_TRUE(std::is_sorted(pack.samples.begin(), pack.samples.end()));
        EXPECT_EQ(pack.tokens, tokens);
        EXPECT_LE(pack.tokens, options.pack_max_length);
        EXPECT_GE(pack.padding, 0);
        EXPECT_GE(pack.padded_length(), 1);
        padding += pack.padding;
        switch (options.pad_to) {
          case PadTo::kCap:
            EXPECT_EQ(pack.padded_length(), options.pack_max_length);
            break;
          case PadTo::kStepMax: {
            int64_t slot_max = 1;
            for (const auto& other : plan.packs) slot_max = std::max(slot_max, other[step][slot].tokens);
            EXPECT_EQ(pack.padded_length(), slot_max);
            break;
          }
          case PadTo::kNone:
            EXPECT_EQ(pack.padding, pack.tokens == 0 ? 1 : 0);
            break;
        }
        for (int64_t piece : padding_sequences(pack.padding, options.pad_chunk)) {
          EXPECT_GE(piece, 1);
          EXPECT_LE(piece, options.pad_chunk);
        }
      }
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "sample " << i;
  // Steps hold group counts within one of each other.
  std::vector<std::set<int64_t>> groups_per_step(static_cast<size_t>(options.optimizer_steps));
  for (const auto& rank : plan.packs) {
    for (size_t step = 0; step < rank.size(); ++step) {
      for (const Pack& pack : rank[step]) {
        for (int64_t s : pack.samples) {
          groups_per_step[step].insert(options.groups.empty() ? s : options.groups[s]);
        }
      }
    }
  }
  auto [fewest, most] = std::minmax_element(groups_per_step.begin(), groups_per_step.end(),
                                            [](const auto& a, const auto& b) { return a.size() < b.size(); });
  EXPECT_LE(most->size() - fewest->size(), 1u);
  EXPECT_EQ(plan.stats.padding_tokens, padding);
  EXPECT_EQ(plan.stats.real_tokens, std::accumulate(lengths.begin(), lengths.end(), int64_t{0}));
  EXPECT_EQ(plan.stats.packs_over_cap, 0);
  EXPECT_EQ(static_cast<int64_t>(plan.stats.packs_per_step.size()), options.optimizer_steps);
  for (int64_t step = 0; step < options.optimizer_steps; ++step) {
    EXPECT_GE(plan.stats.packs_per_step[step], plan.stats.min_packs_per_step[step]);
  }
  EXPECT_EQ(plan.stats.empty_rank_steps > 0,
            !plan.notes.empty() && plan.notes[0].find("no samples") != std::string::npos);
}

struct Case {
  int64_t n, dp, steps, cap;
};

TEST(PackPlan, GuaranteesHoldOnRandomInputs) {
  std::mt19937_64 rng(7);
  const std::vector<Case> cases = {
      {0, 4, 3, 100}, {1, 1, 1, 10},    {1, 8, 4, 100},    {5, 4, 8, 50},       {7, 8, 2, 1000},   {31, 4, 8, 300},
      {64, 8, 8, 64}, {100, 3, 5, 400}, {257, 8, 4, 2048}, {1000, 16, 4, 8192}, {600, 7, 3, 1500}, {40, 1, 1, 100},
  };
  const PadTo pads[] = {PadTo::kCap, PadTo::kStepMax, PadTo::kNone};
  const Workload workloads[] = {Workload::tokens(), Workload::verl()};
  for (const Case& c : cases) {
    for (PadTo pad : pads) {
      for (const Workload& workload : workloads) {
        for (bool grouped : {false, true}) {
          auto lengths = random_lengths(rng, c.n, 0, c.cap);
          std::vector<int64_t> groups;
          std::uniform_int_distribution<int64_t> group_size(1, 6);
          for (int64_t g = 0; grouped && static_cast<int64_t>(groups.size()) < c.n; ++g) {
            for (int64_t k = group_size(rng); k > 0 && static_cast<int64_t>(groups.size()) < c.n; --k) {
              groups.push_back(1000 - 3 * g);  // ids need not be small or ordered
            }
          }
          Options options;
          options.dp_size = c.dp;
          options.optimizer_steps = c.steps;
          options.pack_max_length = c.cap;
          options.groups = groups;
          options.workload = workload;
          options.pad_to = pad;
          options.pad_chunk = 1 + c.cap / 7;
          SCOPED_TRACE(testing::Message()
                       << "n=" << c.n << " dp=" << c.dp << " steps=" << c.steps << " cap=" << c.cap
                       << " pad=" << to_string(pad) << " workload=" << workload.name() << " grouped=" << grouped);
          expect_guarantees(plan(lengths, options), lengths, options);
        }
      }
    }
  }
}

TEST(PackPlan, FewerSamplesThanRankStepsStillGivesEveryStep) {
  std::vector<int64_t> lengths = {10, 20, 30};
  Options options{.dp_size = 4, .optimizer_steps = 5, .pack_max_length = 64};
  Plan p = plan(lengths, options);
  expect_guarantees(p, lengths, options);
  EXPECT_EQ(p.stats.empty_rank_steps, 4 * 5 - 3);
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes[0].find("17 of 20"), std::string::npos) << p.notes[0];
  // The three samples sit in three different steps.
  std::set<size_t> steps;
  for (const auto& rank : p.packs) {
    for (size_t s = 0; s < rank.size(); ++s) {
      for (const Pack& pack : rank[s]) {
        if (!pack.samples.empty()) steps.insert(s);
      }
    }
  }
  EXPECT_EQ(steps.size(), 3u);
}

TEST(PackPlan, NoSamplesGivesPaddingOnly) {
  Options options{.dp_size = 2, .optimizer_steps = 3, .pack_max_length = 16, .pad_to = PadTo::kNone};
  Plan p = plan({}, options);
  expect_guarantees(p, {}, options);
  EXPECT_EQ(p.stats.padding_packs, 6);
  EXPECT_EQ(p.stats.padding_tokens, 6);
}

TEST(PackPlan, OneHugeSampleTakesAWholePack) {
  std::vector<int64_t> lengths = {5, 100, 7, 3, 9, 1};
  Options options{.dp_size = 2, .optimizer_steps = 1, .pack_max_length = 100};
  Plan p = plan(lengths, options);
  expect_guarantees(p, lengths, options);
  EXPECT_EQ(p.stats.packs_per_step[0], 1);
  EXPECT_EQ(p.stats.max_pack_tokens, 100);
}

TEST(PackPlan, AllEqualLengthsPackExactly) {
  std::vector<int64_t> lengths(256, 1000);
  Options options{.dp_size = 8, .optimizer_steps = 4, .pack_max_length = 4000};
  Plan p = plan(lengths, options);
  expect_guarantees(p, lengths, options);
  for (int64_t step = 0; step < 4; ++step) {
    EXPECT_EQ(p.stats.packs_per_step[step], 2);
    EXPECT_EQ(p.stats.token_spread[step], 0.0);
  }
  EXPECT_EQ(p.stats.padding_tokens, 0);
}

TEST(PackPlan, LongerSampleThanCapIsAnErrorNamingIt) {
  std::vector<int64_t> lengths = {5, 6, 101, 7};
  Options options{.dp_size = 2, .optimizer_steps = 1, .pack_max_length = 100};
  try {
    plan(lengths, options);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("lengths[2] = 101"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("pack_max_length"), std::string::npos) << e.what();
  }
}

TEST(PackPlan, BadInputIsNamed) {
  std::vector<int64_t> lengths = {5, 6, 7};
  auto message = [&](Options options, std::vector<int64_t> values) {
    try {
      plan(values, options);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Options ok{.dp_size = 2, .optimizer_steps = 2, .pack_max_length = 10};
  Options o = ok;
  o.dp_size = 0;
  EXPECT_NE(message(o, lengths).find("dp_size"), std::string::npos);
  o = ok;
  o.optimizer_steps = -1;
  EXPECT_NE(message(o, lengths).find("optimizer_steps"), std::string::npos);
  o = ok;
  o.pack_max_length = 0;
  EXPECT_NE(message(o, lengths).find("pack_max_length"), std::string::npos);
  o = ok;
  o.pad_chunk = 0;
  EXPECT_NE(message(o, lengths).find("pad_chunk"), std::string::npos);
  EXPECT_NE(message(ok, {5, -1, 7}).find("lengths[1] = -1"), std::string::npos);
  std::vector<int64_t> groups = {1, 2};
  o = ok;
  o.groups = groups;
  EXPECT_NE(message(o, lengths).find("groups"), std::string::npos);
  EXPECT_THROW(parse_pad_to("full"), Error);
}

TEST(PackPlan, RolloutBatchIsBalancedAndTight) {
  std::mt19937_64 rng(11);
  auto lengths = rollout_lengths(rng, 2048, 16384);
  for (PadTo pad : {PadTo::kCap, PadTo::kStepMax}) {
    Options options{.dp_size = 32, .optimizer_steps = 8, .pack_max_length = 65536, .pad_to = pad};
    Plan p = plan(lengths, options);
    expect_guarantees(p, lengths, options);
    for (int64_t step = 0; step < 8; ++step) {
      EXPECT_LE(p.stats.token_spread[step], 0.02) << "step " << step;
      EXPECT_EQ(p.stats.packs_per_step[step], p.stats.min_packs_per_step[step]);
    }
    if (pad == PadTo::kStepMax) {
      EXPECT_LE(p.stats.padding_ratio, 0.15);
    }
  }
}

TEST(PackPlan, SmallCapNeedsSeveralPacksPerStep) {
  std::mt19937_64 rng(3);
  auto lengths = rollout_lengths(rng, 512, 16384);
  Options options{.dp_size = 8, .optimizer_steps = 4, .pack_max_length = 32768, .pad_to = PadTo::kStepMax};
  Plan p = plan(lengths, options);
  expect_guarantees(p, lengths, options);
  for (int64_t step = 0; step < 4; ++step) {
    EXPECT_GE(p.stats.packs_per_step[step], 2);
    EXPECT_LE(p.stats.token_spread[step], 0.02);
  }
  EXPECT_LE(p.stats.padding_ratio, 0.15);
}

TEST(PackPlan, IsDeterministicAndSeedOnlyMovesRanks) {
  std::mt19937_64 rng(5);
  auto lengths = random_lengths(rng, 300, 1, 500);
  Options options{.dp_size = 6, .optimizer_steps = 3, .pack_max_length = 2000};
  Plan a = plan(lengths, options);
  Plan b = plan(lengths, options);
  options.seed = 42;
  Plan c = plan(lengths, options);
  expect_guarantees(c, lengths, options);
  std::multiset<std::vector<int64_t>> packs_a;
  std::multiset<std::vector<int64_t>> packs_c;
  for (size_t r = 0; r < a.packs.size(); ++r) {
    for (size_t s = 0; s < a.packs[r].size(); ++s) {
      for (size_t j = 0; j < a.packs[r][s].size(); ++j) {
        EXPECT_EQ(a.packs[r][s][j].samples, b.packs[r][s][j].samples);
        packs_a.insert(a.packs[r][s][j].samples);
      }
      for (const Pack& pack : c.packs[r][s]) packs_c.insert(pack.samples);
    }
  }
  EXPECT_EQ(packs_a, packs_c);
}

TEST(PackPlan, GroupsStayTogetherWhenFewerGroupsThanRanks) {
  std::vector<int64_t> lengths = {10, 10, 10, 10, 50, 50, 5, 5};
  std::vector<int64_t> groups = {7, 7, 7, 7, 3, 3, 9, 9};
  Options options{.dp_size = 4, .optimizer_steps = 1, .pack_max_length = 60, .groups = groups};
  Plan p = plan(lengths, options);
  expect_guarantees(p, lengths, options);
  // The group of two 50-token samples needs two packs on its rank.
  EXPECT_EQ(p.stats.packs_per_step[0], 2);
}

TEST(PackPlan, AboutOneGroupPerRankStepGroupsStepsBySize) {
  // 256 prompts x 8 responses over 32 ranks x 8 steps: one group per (rank,
  // step). Balanced steps would pair large and small groups in every step.
  std::mt19937_64 rng(11);
  auto lengths = rollout_lengths(rng, 2048, 16384);
  std::vector<int64_t> groups(lengths.size());
  for (size_t i = 0; i < groups.size(); ++i) groups[i] = static_cast<int64_t>(i / 8);
  Options options{.dp_size = 32, .optimizer_steps = 8, .pack_max_length = 65536, .groups = groups};
  Plan p = plan(lengths, options);
  expect_guarantees(p, lengths, options);
  int64_t waited = 0;
  for (int64_t step = 0; step < 8; ++step) {
    int64_t slowest = 0;
    for (const auto& rank : p.stats.tokens) slowest = std::max(slowest, rank[step]);
    waited += slowest;
  }
  const double ideal = static_cast<double>(p.stats.real_tokens) / 32.0;
  EXPECT_LE(static_cast<double>(waited), 1.3 * ideal);
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes[0].find("similar workload"), std::string::npos) << p.notes[0];
}

TEST(PackPlan, PaddingSequencesAreChunks) {
  EXPECT_EQ(padding_sequences(0, 4), std::vector<int64_t>{});
  EXPECT_EQ(padding_sequences(9, 4), (std::vector<int64_t>{4, 4, 1}));
  EXPECT_EQ(padding_sequences(8, 4), (std::vector<int64_t>{4, 4}));
  EXPECT_THROW(padding_sequences(3, 0), Error);
}

// Packs are materialized with int32 cu_seqlens: a longer cap is refused, by
// name and value, where it used to overflow padding_tokens to a negative number.
TEST(PackPlan, PackMaxLengthBeyondInt32IsRefused) {
  const std::vector<int64_t> lengths = {10, 20, 50};
  for (int64_t cap : {int64_t{1} << 31, int64_t{1} << 40, int64_t{1} << 62}) {
    EXPECT_TRUE(
        test::throws_invalid([&] { plan(lengths, {.dp_size = 2, .optimizer_steps = 1, .pack_max_length = cap}); },
                             {"pack_max_length", std::to_string(cap), "2147483647"}));
  }
  const int64_t longest = INT32_MAX;
  Plan p = plan(lengths, {.dp_size = 2, .optimizer_steps = 1, .pack_max_length = longest, .pad_chunk = 4096});
  EXPECT_EQ(p.stats.padding_tokens, 2 * longest - 80);
  EXPECT_EQ(p.stats.real_tokens, 80);
}

TEST(PackPlan, PaddingSequencesRefuseMoreThanOnePackOfPadding) {
  EXPECT_TRUE(test::throws_invalid([] { padding_sequences(int64_t{1} << 40, 1024); },
                                   {"padding", "1099511627776", "2147483647"}));
  EXPECT_EQ(padding_sequences(INT32_MAX, int64_t{1} << 30),
            (std::vector<int64_t>{int64_t{1} << 30, (int64_t{1} << 30) - 1}));
}

// pad_chunk = 1 under the longest cap would describe one pack's padding with
// 2^31 one-token sequences.
TEST(PackPlan, PaddingIsNeverBillionsOfSequences) {
  const std::vector<int64_t> lengths = {10};
  EXPECT_TRUE(test::throws_invalid(
      [&] { plan(lengths, {.dp_size = 1, .optimizer_steps = 1, .pack_max_length = INT32_MAX, .pad_chunk = 1}); },
      {"pad_chunk = 1 splits pack_max_length = 2147483647", "1048576", "at least 2048"}));
  EXPECT_TRUE(
      test::throws_invalid([] { padding_sequences(INT32_MAX, 1); }, {"pad_chunk = 1 splits padding = 2147483647"}));
  EXPECT_EQ(padding_sequences(int64_t{1} << 20, 1).size(), size_t{1} << 20);
}

TEST(PackPlan, TooManyRankStepsAreRefusedBeforeAllocating) {
  EXPECT_TRUE(test::throws_invalid([] { plan({}, {.dp_size = 2048, .optimizer_steps = 1024, .pack_max_length = 10}); },
                                   {"dp_size x optimizer_steps (2048 x 1024)", "2097152", "1048576"}));
}

// One group of 2048 full samples lands on one rank: 2048 packs per rank on
// 1024 ranks is 2^21 packs, over the limit, refused before the packs exist.
TEST(PackPlan, TooManyPacksAreRefusedBeforeAllocating) {
  const std::vector<int64_t> lengths(2048, 10);
  const std::vector<int64_t> groups(lengths.size(), 7);
  EXPECT_TRUE(test::throws_invalid(
      [&] { plan(lengths, {.dp_size = 1024, .optimizer_steps = 1, .pack_max_length = 10, .groups = groups}); },
      {"packs", "2048 per rank on 1024 ranks", "1048576", "pack_max_length"}));
}

// Two verl costs of about 2^62 each: the plan names its own parameter, lengths.
TEST(PackPlan, TotalWorkloadOverflowNamesLengths) {
  const std::vector<int64_t> lengths = {INT32_MAX, INT32_MAX};
  EXPECT_TRUE(test::throws_invalid(
      [&] {
        plan(lengths, {.dp_size = 1,
                       .optimizer_steps = 3,
                       .pack_max_length = INT32_MAX,
                       .workload = Workload::verl(),
                       .pad_chunk = 4096});
      },
      {"lengths", "verl", "overflows"}));
}

// The statistics are summed with checks: an overflow is an error, never a
// negative padding_tokens.
TEST(PackPlan, StatsOverflowIsAnErrorNotAWrappedSum) {
  Plan p;
  p.dp_size = 2;
  p.optimizer_steps = 1;
  p.pack_max_length = INT64_MAX;
  p.packs.assign(2, std::vector<std::vector<Pack>>(1, std::vector<Pack>(1)));
  p.packs[0][0][0].padding = int64_t{1} << 62;
  p.packs[1][0][0].padding = int64_t{1} << 62;
  EXPECT_TRUE(test::throws_invalid([&] { detail::summarize(p, {}, Workload::tokens()); },
                                   {"padding_tokens", "overflows int64"}));
}

}  // namespace
}  // namespace seqflow::pack
