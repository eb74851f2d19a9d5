// pack::plan's progress callback: its phases, its bounded rate, and a plan
// that does not depend on it.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <vector>

#include "seqflow/pack.h"

namespace seqflow::pack {
namespace {

std::vector<int64_t> random_lengths(int64_t n, int64_t lo, int64_t hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (auto& v : out) v = dist(rng);
  return out;
}

// Every call, then checks per phase: starts at 0, only goes forward, ends at
// total (the sample count), within the bounded number of calls.
struct Recorder {
  std::vector<PlanProgress> calls;

  PlanProgressCallback callback() {
    return [this](const PlanProgress& at) { calls.push_back(at); };
  }

  std::vector<PlanPhase> phases() const {
    std::vector<PlanPhase> out;
    for (const PlanProgress& at : calls) {
      if (out.empty() || out.back() != at.phase) out.push_back(at.phase);
    }
    return out;
  }

  void expect_each_phase_runs_to(int64_t total) const {
    for (PlanPhase phase : phases()) {
      std::vector<PlanProgress> of_phase;
      for (const PlanProgress& at : calls) {
        if (at.phase == phase) of_phase.push_back(at);
      }
      SCOPED_TRACE(std::string(to_string(phase)));
      ASSERT_FALSE(of_phase.empty());
      EXPECT_EQ(of_phase.front().done, 0);
      EXPECT_EQ(of_phase.back().done, total);
      EXPECT_LE(static_cast<int64_t>(of_phase.size()), kProgressUpdates + 2);
      for (size_t i = 0; i < of_phase.size(); ++i) {
        EXPECT_EQ(of_phase[i].total, total);
        // Never back, and never the same done twice (each call is news).
        if (i > 0) {
          EXPECT_GT(of_phase[i].done, of_phase[i - 1].done);
        }
      }
    }
  }
};

void expect_same_plan(const Plan& a, const Plan& b) {
  ASSERT_EQ(a.packs.size(), b.packs.size());
  for (size_t rank = 0; rank < a.packs.size(); ++rank) {
    ASSERT_EQ(a.packs[rank].size(), b.packs[rank].size());
    for (size_t step = 0; step < a.packs[rank].size(); ++step) {
      ASSERT_EQ(a.packs[rank][step].size(), b.packs[rank][step].size());
      for (size_t slot = 0; slot < a.packs[rank][step].size(); ++slot) {
        const Pack& x = a.packs[rank][step][slot];
        const Pack& y = b.packs[rank][step][slot];
        ASSERT_EQ(x.samples, y.samples) << rank << " " << step << " " << slot;
        ASSERT_EQ(x.padding, y.padding);
      }
    }
  }
  EXPECT_EQ(a.stats.tokens, b.stats.tokens);
  EXPECT_EQ(a.stats.workloads, b.stats.workloads);
  EXPECT_EQ(a.notes, b.notes);
}

TEST(PackPlanProgress, AMillionSamplesOverManyStepsAreReportedAtABoundedRate) {
  // 2,048 steps: reporting each step would exceed the bound, reporting each
  // sample would exceed it 500 times.
  const auto lengths = random_lengths(int64_t{1} << 20, 1, 512, 3);
  Options options{.dp_size = 4, .optimizer_steps = 2048, .pack_max_length = 4096};
  Recorder recorder;
  options.progress = recorder.callback();
  const Plan with = plan(lengths, options);
  EXPECT_EQ(recorder.phases(), (std::vector<PlanPhase>{PlanPhase::kStepsFirst, PlanPhase::kPacking}));
  recorder.expect_each_phase_runs_to(static_cast<int64_t>(lengths.size()));
  EXPECT_GT(recorder.calls.size(), 100u);  // not only the ends: the bar moves
  options.progress = {};
  expect_same_plan(with, plan(lengths, options));
}

TEST(PackPlanProgress, StepsBySizeIsAPhaseOfItsOwnWhenTried) {
  // One group per (rank, step): the planner tries steps by size (and keeps them).
  const auto lengths = random_lengths(2048, 100, 16000, 11);
  std::vector<int64_t> groups(lengths.size());
  for (size_t i = 0; i < groups.size(); ++i) groups[i] = static_cast<int64_t>(i / 8);
  Options options{.dp_size = 32, .optimizer_steps = 8, .pack_max_length = 65536, .groups = groups};
  Recorder recorder;
  options.progress = recorder.callback();
  const Plan with = plan(lengths, options);
  EXPECT_EQ(recorder.phases(),
            (std::vector<PlanPhase>{PlanPhase::kStepsFirst, PlanPhase::kStepsBySize, PlanPhase::kPacking}));
  recorder.expect_each_phase_runs_to(2048);
  options.progress = {};
  expect_same_plan(with, plan(lengths, options));
}

TEST(PackPlanProgress, NoSamplesStartAndEndEachPhaseAtZero) {
  Options options{.dp_size = 2, .optimizer_steps = 3, .pack_max_length = 16};
  Recorder recorder;
  options.progress = recorder.callback();
  plan({}, options);
  ASSERT_EQ(recorder.calls.size(), 2u);
  recorder.expect_each_phase_runs_to(0);
}

TEST(PackPlanProgress, AnExceptionFromTheCallbackLeavesPlan) {
  Options options{.dp_size = 2, .optimizer_steps = 2, .pack_max_length = 100};
  options.progress = [](const PlanProgress& at) {
    if (at.phase == PlanPhase::kPacking) throw std::runtime_error("cancelled");
  };
  EXPECT_THROW(plan(std::vector<int64_t>{5, 6, 7, 8}, options), std::runtime_error);
}

TEST(PackPlanProgress, PhasesHaveNames) {
  EXPECT_EQ(to_string(PlanPhase::kStepsFirst), "steps_first");
  EXPECT_EQ(to_string(PlanPhase::kStepsBySize), "steps_by_size");
  EXPECT_EQ(to_string(PlanPhase::kPacking), "packing");
}

}  // namespace
}  // namespace seqflow::pack
