// Samplers, driven through a real Controller: sequential, GRPO groups,
// rank-aware answers, seqlen-balanced and token-budget global batches, and
// the registry.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <unordered_set>

#include "controller_test_support.h"
#include "common/json_text.h"
#include "core/samplers/reservation_book.h"
#include "seqflow/balance.h"
#include "seqflow/controller.h"
#include "seqflow/sampler.h"

namespace seqflow {
namespace {

using test::fetch_request;
using test::lengths_meta;
using test::put;
using test::sorted;
using test::throws_code;

std::vector<int64_t> fetch(Controller& controller, int64_t batch_size, int64_t dp_rank = 0, int64_t batch_index = 0,
                           const std::string& task = "t") {
  return controller.get_meta(fetch_request("p", task, {"x"}, batch_size, dp_rank, batch_index)).global_indexes;
}

Controller with(std::shared_ptr<Sampler> sampler) { return Controller(ControllerOptions{std::move(sampler), false}); }

int64_t tokens(const std::vector<int64_t>& indexes, const std::vector<int64_t>& lengths) {
  int64_t sum = 0;
  for (int64_t index : indexes) sum += lengths[static_cast<size_t>(index)];
  return sum;
}

// Each group (runs of n in put order, starting at index 0) lies in one answer.
void expect_whole_groups(const std::vector<std::vector<int64_t>>& answers, int64_t n) {
  std::map<int64_t, size_t> answer_of_group;
  for (size_t a = 0; a < answers.size(); ++a) {
    for (int64_t index : answers[a]) {
      auto [it, inserted] = answer_of_group.emplace(index / n, a);
      EXPECT_EQ(it->second, a) << "group of index " << index << " is split";
    }
  }
}

void expect_disjoint(const std::vector<std::vector<int64_t>>& answers) {
  std::set<int64_t> seen;
  for (const auto& answer : answers) {
    for (int64_t index : answer) EXPECT_TRUE(seen.insert(index).second) << "index " << index << " twice";
  }
}

// Per-sample facts for samplers called without a controller: groups are runs
// of n from index 0, lengths from a map.
class StubInfo final : public SampleInfo {
 public:
  explicit StubInfo(std::map<int64_t, int64_t> lengths = {}, bool has_lengths = true)
      : lengths_(std::move(lengths)), has_lengths_(has_lengths) {}
  std::optional<int64_t> length(int64_t global_index) const override {
    auto it = lengths_.find(global_index);
    return it == lengths_.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }
  std::string group_key(int64_t global_index, int64_t n) const override { return std::to_string(global_index / n); }
  const Value& custom_meta(int64_t) const override {
    static const Value kEmpty = Value::object();
    return kEmpty;
  }
  bool has_lengths() const override { return has_lengths_; }

 private:
  std::map<int64_t, int64_t> lengths_;
  bool has_lengths_;
};

std::vector<int64_t> range(int64_t begin, int64_t end) {
  std::vector<int64_t> out(static_cast<size_t>(end - begin));
  std::iota(out.begin(), out.end(), begin);
  return out;
}

// One direct call, as a caller outside a controller makes it.
SampleResult call(Sampler& sampler, const std::vector<int64_t>& ready, int64_t batch_size, const SampleInfo& info,
                  SamplingConfig sampling = {}) {
  SampleRequest request;
  request.ready = ready;
  request.batch_size = batch_size;
  request.partition_id = "p";
  request.task_name = "t";
  request.sampling = sampling;
  request.info = &info;
  return sampler.sample(request);
}

std::vector<int64_t> without(std::vector<int64_t> from, const std::vector<int64_t>& taken) {
  std::erase_if(from, [&](int64_t index) { return std::find(taken.begin(), taken.end(), index) != taken.end(); });
  return from;
}

TEST(SamplerSequential, OldestBatchOrNothing) {
  Controller controller = with(make_sequential_sampler());
  put(controller, "p", 5, {"x"});
  EXPECT_EQ(fetch(controller, 3), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(fetch(controller, 3).empty());
  EXPECT_EQ(make_sequential_sampler()->name(), "sequential");
}

TEST(SamplerGRPOGroupN, WholeGroupsOnlyOldestCompleteFirst) {
  Controller controller = with(make_grpo_group_n_sampler(3));
  const BatchMeta first = controller.insert("p", 3);   // group A: 0 1 2
  const BatchMeta second = controller.insert("p", 3);  // group B: 3 4 5
  // B complete, A missing one member.
  controller.mark_produced("p", second.global_indexes, {}, test::fields_of({"x"}), {});
  const std::vector<int64_t> partial = {0, 1};
  controller.mark_produced("p", partial, {}, test::fields_of({"x"}), {});
  EXPECT_TRUE(fetch(controller, 6).empty());
  EXPECT_EQ(fetch(controller, 3), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_TRUE(fetch(controller, 3).empty());
  const std::vector<int64_t> last = {2};
  controller.mark_produced("p", last, {}, test::fields_of({"x"}), {});
  EXPECT_EQ(sorted(fetch(controller, 3)), first.global_indexes);
  EXPECT_TRUE(throws_code([&] { fetch(controller, 4); }, ErrorCode::kInvalidArgument,
                          {"batch_size (4)", "n_samples_per_prompt (3)"}));
  EXPECT_TRUE(throws_code([] { make_grpo_group_n_sampler(0); }, ErrorCode::kInvalidArgument,
                          {"n_samples_per_prompt must be positive, got 0"}));
}

TEST(SamplerGRPOGroupN, GroupIdJoinsSamplesOfDifferentPuts) {
  Controller controller = with(make_grpo_group_n_sampler(2));
  // Members of prompt "u1" arrive in two puts, interleaved with "u2".
  put(controller, "p", 2, {"x"}, {{{"group_id", "u1"}}, {{"group_id", "u2"}}});
  EXPECT_TRUE(fetch(controller, 2).empty());
  put(controller, "p", 2, {"x"}, {{{"group_id", "u2"}}, {{"group_id", "u1"}}});
  EXPECT_EQ(fetch(controller, 2), (std::vector<int64_t>{1, 2}));  // u2 completes first
  EXPECT_EQ(fetch(controller, 2), (std::vector<int64_t>{0, 3}));
}

TEST(SamplerRankAware, SameRankAndBatchGetTheSameSamples) {
  Controller controller = with(make_rank_aware_sampler());
  put(controller, "p", 8, {"x"});
  const auto rank0 = fetch(controller, 2, 0, 0);
  const auto rank1 = fetch(controller, 2, 1, 0);
  EXPECT_EQ(rank0, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(rank1, (std::vector<int64_t>{2, 3}));
  // Another TP rank of DP rank 0 asks for batch 0 again: same answer.
  EXPECT_EQ(fetch(controller, 2, 0, 0), rank0);
  EXPECT_EQ(fetch(controller, 2, 1, 0), rank1);
  EXPECT_EQ(fetch(controller, 2, 0, 1), (std::vector<int64_t>{4, 5}));
  // A new task starts over.
  EXPECT_EQ(fetch(controller, 2, 1, 0, "u"), (std::vector<int64_t>{0, 1}));
}

// TransferQueue defect 1: its SeqlenBalancedSampler marked only the caller's
// share consumed, so rank 0 asking for batch 1 before rank 1 fetched batch 0
// got rank 1's samples of batch 0 again.
TEST(SamplerSeqlenBalanced, RankZeroRunningAheadNeverDuplicates) {
  Controller controller = with(make_seqlen_balanced_sampler(2, 2));
  const std::vector<int64_t> lengths = {5, 9, 1, 7, 3, 3, 8, 2, 6, 4, 4, 6, 9, 1, 2, 2};
  put(controller, "p", 16, {"x"}, lengths_meta(lengths));
  const auto r0b0 = fetch(controller, 4, 0, 0);
  const auto r0b1 = fetch(controller, 4, 0, 1);
  const auto r1b0 = fetch(controller, 4, 1, 0);
  const auto r1b1 = fetch(controller, 4, 1, 1);
  const std::vector<std::vector<int64_t>> answers = {r0b0, r0b1, r1b0, r1b1};
  for (const auto& answer : answers) EXPECT_EQ(answer.size(), 4u);
  expect_disjoint(answers);
  expect_whole_groups(answers, 2);
  // Batch 0 is the oldest eight samples, batch 1 the next eight.
  std::vector<int64_t> batch0 = r0b0;
  batch0.insert(batch0.end(), r1b0.begin(), r1b0.end());
  EXPECT_EQ(sorted(batch0), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(controller.all_consumed("t", "p"));
  // Any rank repeating a batch (another TP rank) gets the same answer.
  EXPECT_EQ(fetch(controller, 4, 1, 0), r1b0);
}

TEST(SamplerSeqlenBalanced, BalancesTokensAcrossRanks) {
  Controller controller = with(make_seqlen_balanced_sampler(1, 4));
  std::vector<int64_t> lengths;
  for (int i = 0; i < 64; ++i) lengths.push_back(100 + (i * 7919) % 3000);
  put(controller, "p", 64, {"x"}, lengths_meta(lengths));
  std::vector<int64_t> sums;
  for (int rank = 0; rank < 4; ++rank) sums.push_back(tokens(fetch(controller, 16, rank), lengths));
  const auto [lo, hi] = std::minmax_element(sums.begin(), sums.end());
  EXPECT_LE(*hi - *lo, 3000 / 10) << "spread too large";
  EXPECT_EQ(std::accumulate(sums.begin(), sums.end(), int64_t{0}),
            std::accumulate(lengths.begin(), lengths.end(), int64_t{0}));
}

// With a workload, kk balances the group sums of its costs: the expected
// split is TransferQueue's over those sums, whichever way the sampler is made.
TEST(SamplerSeqlenBalanced, KKBalancesTheWorkloadsGroupSums) {
  const Workload squares = Workload::quadratic(0, 1);
  // Group sums 19, 16, 19, 19 tokens but 135, 78, 123, 117 squares: the splits differ.
  const std::vector<int64_t> lengths = {1, 2, 9, 7, 1, 4, 6, 5, 8, 7, 3, 1, 1, 8, 6, 4};
  std::vector<int64_t> sums;
  for (size_t g = 0; g < 4; ++g) {
    int64_t sum = 0;
    for (size_t i = g * 4; i < g * 4 + 4; ++i) sum += squares.cost(lengths[i]);
    sums.push_back(sum);
  }
  const auto parts = balance::get_seqlen_balanced_partitions(sums, 2, true);
  const std::vector<int64_t> token_sums = {19, 16, 19, 19};
  ASSERT_NE(balance::get_seqlen_balanced_partitions(token_sums, 2, true), parts);
  const std::shared_ptr<Sampler> samplers[] = {
      make_seqlen_balanced_sampler(4, 2, "kk", -1, squares),
      make_sampler(
          "seqlen_balanced",
          Value{{"n_samples_per_prompt", 4}, {"dp_size", 2}, {"algorithm", "kk"}, {"workload", "quadratic(0,1)"}}),
      make_sampler("seqlen_balanced", Value{{"n_samples_per_prompt", 4},
                                            {"dp_size", 2},
                                            {"algorithm", "kk"},
                                            {"workload", parse_json_text(squares.to_json(), kMaxDecodeNesting)}})};
  for (const auto& sampler : samplers) {
    Controller controller = with(sampler);
    put(controller, "p", 16, {"x"}, lengths_meta(lengths));
    for (size_t rank = 0; rank < 2; ++rank) {
      std::vector<int64_t> expected;
      for (int64_t g : parts[rank]) {
        for (int64_t i = 0; i < 4; ++i) expected.push_back(g * 4 + i);
      }
      EXPECT_EQ(fetch(controller, 8, static_cast<int64_t>(rank)), expected) << "rank " << rank;
    }
  }
  EXPECT_TRUE(throws_code(
      [] {
        make_sampler("token_budget", Value{{"max_tokens", 10}, {"dp_size", 1}, {"workload", 3}});
      },
      ErrorCode::kInvalidArgument, {"argument 'workload' of sampler 'token_budget'"}));
}

TEST(SamplerSeqlenBalanced, GroupCountsThatDoNotDivideAreBalancedNotFatal) {
  // n 4, dp 2, 6 per rank: 12 samples, 3 groups over 2 ranks.
  Controller controller = with(make_seqlen_balanced_sampler(4, 2));
  put(controller, "p", 12, {"x"}, lengths_meta(std::vector<int64_t>(12, 10)));
  const auto rank0 = fetch(controller, 6, 0);
  const auto rank1 = fetch(controller, 6, 1);
  std::vector<size_t> sizes = {rank0.size(), rank1.size()};
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 8}));
  expect_whole_groups({rank0, rank1}, 4);
  expect_disjoint({rank0, rank1});
}

TEST(SamplerSeqlenBalanced, KKMatchesTransferQueueExactly) {
  for (int64_t per_rank : {6, 8}) {  // 3 groups (unequal) and 4 groups (equal) over 2 ranks
    SCOPED_TRACE(per_rank);
    Controller controller = with(make_seqlen_balanced_sampler(4, 2, "kk"));
    const std::vector<int64_t> lengths = {9, 3, 4, 1, 8, 8, 2, 2, 1, 1, 7, 5, 6, 6, 3, 3};
    put(controller, "p", 16, {"x"}, lengths_meta(lengths));
    const auto rank0 = fetch(controller, per_rank, 0);
    const auto rank1 = fetch(controller, per_rank, 1);
    const int64_t groups = per_rank * 2 / 4;
    std::vector<int64_t> sums;
    for (int64_t g = 0; g < groups; ++g) {
      sums.push_back(std::accumulate(lengths.begin() + g * 4, lengths.begin() + g * 4 + 4, int64_t{0}));
    }
    const auto parts = balance::get_seqlen_balanced_partitions(sums, 2, groups % 2 == 0);
    const std::vector<std::vector<int64_t>> answers = {rank0, rank1};
    for (size_t rank = 0; rank < 2; ++rank) {
      std::vector<int64_t> expected;
      for (int64_t g : parts[rank]) {
        for (int64_t i = 0; i < 4; ++i) expected.push_back(g * 4 + i);
      }
      EXPECT_EQ(answers[rank], expected) << "rank " << rank;
    }
  }
}

TEST(SamplerSeqlenBalanced, MissingLengthIsAnErrorUnlessDefaulted) {
  Controller strict = with(make_seqlen_balanced_sampler(1, 2));
  put(strict, "p", 3, {"x"}, lengths_meta({4, 5, 6}));
  put(strict, "p", 1, {"x"});  // index 3: no total_lengths
  EXPECT_TRUE(
      throws_code([&] { fetch(strict, 2); }, ErrorCode::kInvalidArgument, {"global index 3", "'p'", "total_lengths"}));
  EXPECT_FALSE(test::consumed(strict, "t", "p")[0].second) << "nothing may be consumed";
  EXPECT_EQ(fetch(strict, 1, 0).size(), 1u);  // 2 samples suffice; 3 is not read

  Controller lenient = with(make_seqlen_balanced_sampler(1, 2, "auto", 1000));
  put(lenient, "p", 1, {"x"}, lengths_meta({1}));
  put(lenient, "p", 3, {"x"});
  const auto rank0 = fetch(lenient, 2, 0);
  const auto rank1 = fetch(lenient, 2, 1);
  EXPECT_EQ(rank0.size() + rank1.size(), 4u);
}

TEST(SamplerSeqlenBalanced, ReservedShareIsServedWhenNothingIsReady) {
  Controller controller = with(make_seqlen_balanced_sampler(1, 2));
  put(controller, "p", 4, {"x"}, lengths_meta({1, 2, 3, 4}));
  EXPECT_EQ(fetch(controller, 2, 0).size(), 2u);
  EXPECT_TRUE(controller.all_consumed("t", "p"));  // the whole global batch
  EXPECT_EQ(fetch(controller, 2, 1).size(), 2u);   // polling, nothing ready: reserved
  EXPECT_TRUE(fetch(controller, 2, 1, 1).empty());
}

TEST(SamplerSeqlenBalanced, BadArguments) {
  Controller controller = with(make_seqlen_balanced_sampler(2, 2));
  put(controller, "p", 4, {"x"}, lengths_meta({1, 2, 3, 4}));
  EXPECT_TRUE(throws_code([&] { fetch(controller, 2, 2); }, ErrorCode::kInvalidArgument, {"dp_rank", "2"}));
  Controller threes = with(make_seqlen_balanced_sampler(3, 2));
  put(threes, "p", 6, {"x"}, lengths_meta({1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(throws_code([&] { fetch(threes, 2, 0); }, ErrorCode::kInvalidArgument,
                          {"batch_size * dp_size (2 * 2)", "n_samples_per_prompt (3)"}));
  EXPECT_TRUE(throws_code([&] { fetch(controller, 1, 0); }, ErrorCode::kInvalidArgument, {"fewer than dp_size"}));
  EXPECT_TRUE(throws_code([] { make_seqlen_balanced_sampler(1, 0); }, ErrorCode::kInvalidArgument, {"dp_size"}));
  EXPECT_TRUE(throws_code([] { make_seqlen_balanced_sampler(1, 2, "greedy"); }, ErrorCode::kInvalidArgument,
                          {"algorithm", "greedy"}));
}

TEST(SamplerSeqlenBalanced, StateIsClearedWithPartitionAndTaskReset) {
  Controller controller = with(make_seqlen_balanced_sampler(1, 2));
  put(controller, "p", 4, {"x"}, lengths_meta({1, 2, 3, 4}));
  fetch(controller, 2, 0);
  const std::string t = "t";
  controller.reset_consumption("p", &t);
  // The reservation is gone with the task's consumption: a fresh global batch.
  const auto rank1 = fetch(controller, 2, 1);
  const auto rank0 = fetch(controller, 2, 0);
  expect_disjoint({rank0, rank1});
  EXPECT_EQ(rank0.size() + rank1.size(), 4u);
  controller.clear_partition("p");
  put(controller, "p", 4, {"x"}, lengths_meta({1, 2, 3, 4}));
  EXPECT_EQ(fetch(controller, 2, 1).size(), 2u);
  EXPECT_EQ(fetch(controller, 2, 0).size(), 2u);
  EXPECT_TRUE(controller.all_consumed("t", "p"));
}

TEST(SamplerTokenBudget, FillsEachRankUpToTheBudgetWithWholeGroups) {
  Controller controller = with(make_token_budget_sampler(100, 2, 2));
  // Groups (of 2): 30, 50, 40, 60, 20, 70 tokens.
  const std::vector<int64_t> lengths = {10, 20, 25, 25, 20, 20, 30, 30, 5, 15, 35, 35};
  put(controller, "p", 12, {"x"}, lengths_meta(lengths));
  // Budget 200: 30 + 50 + 40 + 60 = 180 fits, + 20 = 200 fits, + 70 does not.
  const auto rank0 = fetch(controller, 1000, 0);
  const auto rank1 = fetch(controller, 1000, 1);
  expect_whole_groups({rank0, rank1}, 2);
  expect_disjoint({rank0, rank1});
  EXPECT_LE(tokens(rank0, lengths), 100);
  EXPECT_LE(tokens(rank1, lengths), 100);
  EXPECT_EQ(rank0.size() + rank1.size(), 10u);
  // The last group waits: it alone does not fill a batch.
  EXPECT_TRUE(fetch(controller, 1000, 0, 1).empty());
}

TEST(SamplerTokenBudget, WaitsUntilTheBudgetIsFullAndHonoursTheSampleCap) {
  Controller controller = with(make_token_budget_sampler(100, 1, 2));
  put(controller, "p", 3, {"x"}, lengths_meta({50, 50, 50}));
  EXPECT_TRUE(fetch(controller, 1000, 0).empty());  // 150 of 200: not full
  put(controller, "p", 1, {"x"}, lengths_meta({60}));
  EXPECT_EQ(fetch(controller, 1000, 0).size() + fetch(controller, 1000, 1).size(), 3u);
  // batch_size caps samples per global batch at batch_size * dp_size.
  put(controller, "p", 4, {"x"}, lengths_meta({1, 1, 1, 1}));
  const auto rank0 = fetch(controller, 1, 0, 1);
  const auto rank1 = fetch(controller, 1, 1, 1);
  EXPECT_EQ(rank0.size() + rank1.size(), 2u);
}

TEST(SamplerTokenBudget, GroupOverTheBudgetIsAnError) {
  Controller controller = with(make_token_budget_sampler(100, 2, 2));
  put(controller, "p", 2, {"x"}, lengths_meta({60, 70}));
  EXPECT_TRUE(
      throws_code([&] { fetch(controller, 10, 0); }, ErrorCode::kInvalidArgument, {"130 tokens", "max_tokens 100"}));
  EXPECT_FALSE(controller.all_consumed("t", "p"));
}

TEST(SamplerRegistry, BuildsByNameAndRejectsBadArguments) {
  EXPECT_EQ(make_sampler("sequential", nullptr)->name(), "sequential");
  EXPECT_EQ(make_sampler("rank_aware", Value::object())->name(), "rank_aware");
  EXPECT_EQ(make_sampler("grpo_group_n", {{"n_samples_per_prompt", 4}})->name(), "grpo_group_n");
  EXPECT_EQ(make_sampler("seqlen_balanced",
                         {{"n_samples_per_prompt", 4}, {"dp_size", 2}, {"algorithm", "kk"}, {"default_length", 0}})
                ->name(),
            "seqlen_balanced");
  EXPECT_EQ(make_sampler("token_budget", {{"max_tokens", 4096}, {"dp_size", 2}})->name(), "token_budget");
  const ErrorCode invalid = ErrorCode::kInvalidArgument;
  EXPECT_TRUE(throws_code([] { make_sampler("fifo", nullptr); }, invalid, {"'fifo'"}));
  EXPECT_TRUE(throws_code([] { make_sampler("grpo_group_n", Value::object()); }, invalid, {"n_samples_per_prompt"}));
  EXPECT_TRUE(throws_code(
      [] {
        make_sampler("grpo_group_n", {{"n_samples_per_promt", 4}});
      },
      invalid, {"n_samples_per_promt"}));
  EXPECT_TRUE(throws_code(
      [] {
        make_sampler("seqlen_balanced", {{"dp_size", "2"}});
      },
      invalid, {"dp_size", "integer"}));
  EXPECT_TRUE(throws_code([] { make_sampler("seqlen_balanced", {{"dp_size", 0}}); }, invalid, {"dp_size", "0"}));
  EXPECT_TRUE(throws_code([] { make_sampler("token_budget", {{"dp_size", 2}}); }, invalid, {"max_tokens"}));
  EXPECT_TRUE(throws_code([] { make_sampler("sequential", Value::array()); }, invalid, {"object"}));
}

TEST(SamplerDirect, NegativeBatchSizeIsAnErrorNamingTheValue) {
  const StubInfo info({{0, 1}, {1, 1}});
  for (const auto& sampler : {make_sequential_sampler(), make_grpo_group_n_sampler(1), make_rank_aware_sampler(),
                              make_seqlen_balanced_sampler(1, 1), make_token_budget_sampler(10, 1, 1)}) {
    SCOPED_TRACE(sampler->name());
    EXPECT_TRUE(throws_code(
        [&] {
          call(*sampler, {0, 1}, -1, info);
        },
        ErrorCode::kInvalidArgument, {"batch_size must be >= 0, got -1"}));
  }
}

TEST(SamplerGRPOGroupN, BatchSizeZeroIsEmpty) {
  const StubInfo info;
  EXPECT_TRUE(call(*make_grpo_group_n_sampler(2), range(0, 4), 0, info).sampled.empty());
  EXPECT_TRUE(call(*make_grpo_group_n_sampler(1), range(0, 4), 0, info).sampled.empty());
}

TEST(SamplerGRPOGroupN, NamedRankGetsItsAnswerAgain) {
  const auto sampler = make_grpo_group_n_sampler(2);
  const StubInfo info;
  const SamplingConfig named{1, 3, true};
  const SampleResult first = call(*sampler, range(0, 8), 2, info, named);
  EXPECT_EQ(first.sampled, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(first.consumed, first.sampled);
  // Another TP rank of DP rank 1: the same groups, consumed once only.
  const SampleResult again = call(*sampler, range(2, 8), 2, info, named);
  EXPECT_EQ(again.sampled, first.sampled);
  EXPECT_TRUE(again.consumed.empty());
  EXPECT_EQ(sampler->reserved("p", "t", named), first.sampled);
  // Unnamed callers take new groups every time.
  const SamplingConfig unnamed{1, 3, false};
  EXPECT_EQ(call(*sampler, range(2, 8), 2, info, unnamed).sampled, (std::vector<int64_t>{2, 3}));
  EXPECT_FALSE(sampler->reserved("p", "t", unnamed));
  sampler->clear("p", nullptr);
  EXPECT_FALSE(sampler->reserved("p", "t", named));
}

TEST(SamplerRankAware, NegativeRankIsAnError) {
  const StubInfo info;
  EXPECT_TRUE(throws_code(
      [&] {
        call(*make_rank_aware_sampler(), range(0, 4), 1, info, {-1, 0});
      },
      ErrorCode::kInvalidArgument, {"dp_rank -1 must be greater than or equal to 0"}));
}

// A caller that marks only each rank's own share consumed (TransferQueue's
// contract) still never sees a sample twice: shares not served yet stay out
// of later global batches.
TEST(SamplerSeqlenBalanced, UnservedSharesStayOutOfLaterBatches) {
  const auto sampler = make_seqlen_balanced_sampler(1, 2);
  std::map<int64_t, int64_t> lengths;
  for (int64_t i = 0; i < 8; ++i) lengths[i] = 10 + i;
  const StubInfo info(lengths);
  std::vector<int64_t> ready = range(0, 8);
  const auto r0b0 = call(*sampler, ready, 2, info, {0, 0}).sampled;
  ready = without(ready, r0b0);
  const auto r0b1 = call(*sampler, ready, 2, info, {0, 1}).sampled;
  ready = without(ready, r0b1);
  const auto r1b0 = call(*sampler, ready, 2, info, {1, 0}).sampled;
  const auto r1b1 = call(*sampler, ready, 2, info, {1, 1}).sampled;
  const std::vector<std::vector<int64_t>> answers = {r0b0, r0b1, r1b0, r1b1};
  for (const auto& answer : answers) EXPECT_EQ(answer.size(), 2u);
  expect_disjoint(answers);
}

TEST(SamplerSeqlenBalanced, WithoutLengthsSplitsInOrder) {
  const StubInfo no_lengths({}, false);
  const auto four_groups = make_seqlen_balanced_sampler(2, 2);
  EXPECT_EQ(call(*four_groups, range(0, 10), 4, no_lengths, {1, 0}).sampled, range(4, 8));
  EXPECT_EQ(four_groups->reserved("p", "t", {0, 0}), range(0, 4));
  // 3 groups over 2 ranks: whole groups, counts within one.
  const auto three_groups = make_seqlen_balanced_sampler(4, 2);
  EXPECT_EQ(call(*three_groups, range(0, 12), 6, no_lengths, {0, 0}).sampled, range(0, 4));
  EXPECT_EQ(three_groups->reserved("p", "t", {1, 0}), range(4, 12));
}

TEST(SamplerReservationBook, ServedFlagsSurviveCheckpoints) {
  samplers::ReservationBook book;
  book.put("p", "t", 0, 0, {1, 2});
  book.put("p", "t", 0, 1, {3, 4}, false);
  book.put("p", "u", 0, 1, {5}, false);
  EXPECT_EQ(book.unserved("p", "t"), (std::unordered_set<int64_t>{3, 4}));
  samplers::ReservationBook restored;
  restored.restore(book.state());
  EXPECT_EQ(restored.unserved("p", "t"), (std::unordered_set<int64_t>{3, 4}));
  EXPECT_EQ(restored.take("p", "t", 0, 1), (std::vector<int64_t>{3, 4}));
  EXPECT_TRUE(restored.unserved("p", "t").empty());
  EXPECT_EQ(restored.unserved("p", "u"), (std::unordered_set<int64_t>{5}));
  // A state written before the flag existed: every share counts as served.
  Value old = book.state();
  for (Value& batch : old["reservations"].as_array()) {
    for (Value& rank : batch["ranks"].as_array()) rank.as_object().erase("served");
  }
  restored.restore(old);
  EXPECT_TRUE(restored.unserved("p", "t").empty());
  EXPECT_EQ(restored.find("p", "t", 0, 1), (std::vector<int64_t>{3, 4}));
}

}  // namespace
}  // namespace seqflow
