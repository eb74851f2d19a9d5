// OnlineWorkload on one thread: the prior until min_records, a fit on the
// latest `window` records, a failed refit keeps the model, bad reports and
// options are named; a model resumed from its state answers and learns as the
// original does.
#include <gtest/gtest.h>

#include "calibration_test_support.h"
#include "seqflow/calibration.h"
#include "test_support.h"

namespace seqflow {
namespace {

using test::throws_invalid;

constexpr SecondsCoefficients kFirst{2e-6, 3e-11, 5e-4, 0.02};
constexpr SecondsCoefficients kSecond{1e-6, 2e-10, 1e-4, 0.005};

void report_all(OnlineWorkload& online, const std::vector<TimingRecord>& records) {
  for (const auto& record : records) online.report(record.lengths, record.seconds);
}

void expect_model(const Workload& w, const SecondsCoefficients& truth) {
  ASSERT_EQ(w.kind(), Workload::Kind::kCalibrated) << w.name();
  const SecondsCoefficients& c = w.coefficients();
  EXPECT_TRUE(test::near_relative(c.per_token, truth.per_token, 1e-6)) << w.name();
  EXPECT_TRUE(test::near_relative(c.per_token_squared, truth.per_token_squared, 1e-6)) << w.name();
  EXPECT_TRUE(test::near_relative(c.per_sequence, truth.per_sequence, 1e-6)) << w.name();
  EXPECT_TRUE(test::near_relative(c.per_micro_batch, truth.per_micro_batch, 1e-6)) << w.name();
}

TEST(OnlineWorkload, PriorUntilMinRecordsThenTheFit) {
  test::Rng rng(test::kSeed);
  const auto records = test::synthetic_timings(kFirst, 16, 0.0, rng);
  OnlineWorkload online(Workload::verl(), {.window = 64, .min_records = 16});
  EXPECT_EQ(online.current(), Workload::verl());
  report_all(online, std::vector(records.begin(), records.begin() + 15));
  online.wait_for_refit();
  EXPECT_EQ(online.reports(), 15);
  EXPECT_EQ(online.current(), Workload::verl());
  online.report(records[15].lengths, records[15].seconds);
  online.wait_for_refit();
  EXPECT_EQ(online.reports(), 16);
  expect_model(online.current(), kFirst);
  EXPECT_EQ(online.current().fit().records, 16);
}

TEST(OnlineWorkload, FitsOnlyTheLatestWindow) {
  test::Rng rng(test::kSeed + 1);
  OnlineWorkload online(Workload::tokens(), {.window = 32, .min_records = 16});
  report_all(online, test::synthetic_timings(kFirst, 40, 0.0, rng));
  online.wait_for_refit();
  expect_model(online.current(), kFirst);
  // The hardware changed: once the window holds only new timings, the fit is the new model.
  report_all(online, test::synthetic_timings(kSecond, 32, 0.0, rng));
  online.wait_for_refit();
  expect_model(online.current(), kSecond);
  EXPECT_EQ(online.current().fit().records, 32);
  EXPECT_EQ(online.reports(), 72);
}

// The model in place (a fitted one, as the prior) stays when the refit of
// timings no model of this form explains fails. Only those timings are in
// the window, and no refit runs before min_records of them: the refit that
// fails is the only one (reports after a fit would have refitted on windows
// mixing both, some of which fit).
TEST(OnlineWorkload, AFailedRefitKeepsTheModel) {
  OnlineWorkload online(Workload::calibrated(kFirst), {.window = 16, .min_records = 16});
  // Times that do not grow with the sequences: no model of this form, calibrate throws.
  for (int64_t i = 1; i <= 16; ++i) {
    online.report(std::vector<int64_t>(static_cast<size_t>(i % 3 + 1), i * 100), 0.5);
  }
  online.wait_for_refit();
  EXPECT_EQ(online.state().refitted, 16);
  expect_model(online.current(), kFirst);
}

TEST(OnlineWorkload, BadReportsAndOptionsAreNamed) {
  OnlineWorkload online;
  const std::vector<int64_t> negative = {4, -1};
  EXPECT_TRUE(throws_invalid([&] { online.report(negative, 1.0); }, {"lengths[1] = -1", "negative"}));
  EXPECT_TRUE(throws_invalid([&] { online.report({}, 1.0); }, {"lengths is empty"}));
  const std::vector<int64_t> one = {4};
  EXPECT_TRUE(throws_invalid([&] { online.report(one, 0.0); }, {"seconds = 0"}));
  EXPECT_TRUE(throws_invalid([&] { online.report(one, NAN); }, {"seconds = nan"}));
  EXPECT_EQ(online.reports(), 0);
  EXPECT_TRUE(throws_invalid([] { OnlineWorkload(Workload::tokens(), {.window = 64, .min_records = 3}); },
                             {"min_records = 3"}));
  EXPECT_TRUE(throws_invalid([] { OnlineWorkload(Workload::tokens(), {.window = 8, .min_records = 16}); },
                             {"window = 8", "min_records = 16"}));
}

TEST(OnlineWorkload, ResumedFromItsStateAnswersAndLearnsAsTheOriginal) {
  test::Rng rng(test::kSeed + 3);
  const OnlineOptions options{.window = 32, .min_records = 16};
  OnlineWorkload original(Workload::tokens(), options);
  report_all(original, test::synthetic_timings(kFirst, 40, 0.0, rng));
  original.wait_for_refit();
  const OnlineWorkloadState state = original.state();
  EXPECT_EQ(state.reports, 40);
  EXPECT_EQ(state.refitted, 40);
  ASSERT_EQ(state.window.size(), 32u);
  OnlineWorkload resumed(state, options);
  EXPECT_EQ(resumed.reports(), 40);
  EXPECT_EQ(resumed.current().to_json(), original.current().to_json());  // the fit report too
  // Both go on from the same window: 12 old records stay in it beside 20 new.
  const auto later = test::synthetic_timings(kSecond, 20, 0.0, rng);
  report_all(original, later);
  report_all(resumed, later);
  original.wait_for_refit();
  resumed.wait_for_refit();
  EXPECT_EQ(resumed.current().to_json(), original.current().to_json());
  EXPECT_EQ(resumed.current().fit().records, 32);
  EXPECT_EQ(resumed.reports(), 60);
}

TEST(OnlineWorkload, ARefitPendingInTheStateRunsOnResume) {
  test::Rng rng(test::kSeed + 4);
  const OnlineOptions options{.window = 32, .min_records = 16};
  OnlineWorkloadState state{Workload::tokens(), test::synthetic_timings(kFirst, 16, 0.0, rng), 16, 16};
  OnlineWorkload settled(state, options);  // every record considered: the model stays
  settled.wait_for_refit();
  EXPECT_TRUE(settled.current().is_tokens());
  state.refitted = 0;
  OnlineWorkload pending(state, options);
  pending.wait_for_refit();
  expect_model(pending.current(), kFirst);
}

TEST(OnlineWorkload, AStateNoModelCouldHaveIsNamed) {
  test::Rng rng(test::kSeed + 5);
  const OnlineOptions options{.window = 16, .min_records = 16};
  const OnlineWorkloadState good{Workload::tokens(), test::synthetic_timings(kFirst, 16, 0.0, rng), 20, 20};
  auto refused = [&](auto change, std::initializer_list<std::string_view> fragments) {
    OnlineWorkloadState state = good;
    change(state);
    return throws_invalid([&] { OnlineWorkload online(state, options); }, fragments);
  };
  EXPECT_TRUE(refused([](auto& s) { s.window.push_back(s.window[0]); }, {"window holds 17 records", "window = 16"}));
  EXPECT_TRUE(refused([](auto& s) { s.reports = 15; }, {"reports = 15", "16 records"}));
  EXPECT_TRUE(refused([](auto& s) { s.refitted = -1; }, {"refitted = -1", "0..20"}));
  EXPECT_TRUE(refused([](auto& s) { s.refitted = 21; }, {"refitted = 21", "0..20"}));
  EXPECT_TRUE(refused([](auto& s) { s.window[1].seconds = -2; }, {"window[1].seconds = -2"}));
  EXPECT_TRUE(refused([](auto& s) { s.window[3].lengths = {}; }, {"window[3].lengths is empty"}));
}

}  // namespace
}  // namespace seqflow
