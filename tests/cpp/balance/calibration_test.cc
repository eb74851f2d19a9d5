// calibrate(): recovers known coefficients from synthetic timings with noise
// and outliers, never goes negative, reports its fit, rejects bad input by
// name; the calibrated Workload's costs and seconds.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "calibration_test_support.h"
#include "seqflow/calibration.h"
#include "test_support.h"

namespace seqflow {
namespace {

using test::throws_invalid;

constexpr SecondsCoefficients kTruth{2e-6, 3e-11, 5e-4, 0.02};

using test::model_seconds;

void expect_near_relative(double actual, double expected, double tolerance, const char* what) {
  EXPECT_NEAR(actual, expected, tolerance * expected) << what;
}

void expect_recovers(const Workload& fitted, const SecondsCoefficients& truth, double tolerance) {
  ASSERT_EQ(fitted.kind(), Workload::Kind::kCalibrated);
  const SecondsCoefficients& c = fitted.coefficients();
  expect_near_relative(c.per_token, truth.per_token, tolerance, "per_token");
  expect_near_relative(c.per_token_squared, truth.per_token_squared, tolerance, "per_token_squared");
  expect_near_relative(c.per_sequence, truth.per_sequence, tolerance, "per_sequence");
  expect_near_relative(c.per_micro_batch, truth.per_micro_batch, tolerance, "per_micro_batch");
}

TEST(Calibrate, RecoversExactCoefficientsFromExactTimings) {
  test::Rng rng(test::kSeed);
  const auto records = test::synthetic_timings(kTruth, 64, 0.0, rng);
  const Workload fitted = calibrate(records);
  expect_recovers(fitted, kTruth, 1e-6);
  EXPECT_EQ(fitted.fit().records, 64);
  EXPECT_EQ(fitted.fit().outliers, 0);
  EXPECT_LT(fitted.fit().max_error, 1e-9);
}

TEST(Calibrate, RecoversCoefficientsUnderNoiseAndCountsInjectedOutliers) {
  test::Rng rng(test::kSeed + 1);
  auto records = test::synthetic_timings(kTruth, 400, 0.01, rng);
  // Stragglers: 3x to 10x slower, spread over the run; warm-up: the first 5, 20x slower.
  std::set<size_t> injected;
  std::uniform_int_distribution<size_t> index(5, records.size() - 1);
  std::uniform_real_distribution<double> slowdown(3.0, 10.0);
  while (injected.size() < 15) {
    const size_t i = index(rng);
    if (injected.insert(i).second) records[i].seconds *= slowdown(rng);
  }
  for (size_t i = 0; i < 5; ++i) {
    records[i].seconds *= 20;
    injected.insert(i);
  }
  const Workload fitted = calibrate(records);
  expect_recovers(fitted, kTruth, 0.05);
  const FitReport& fit = fitted.fit();
  EXPECT_EQ(fit.records, 400);
  // 1% noise never reaches the 5% an outlier needs: exactly the injected ones go.
  EXPECT_EQ(fit.outliers, static_cast<int64_t>(injected.size()));
  EXPECT_LT(fit.median_error, 0.015);
  EXPECT_LE(fit.median_error, fit.p90_error);
  EXPECT_LE(fit.p90_error, fit.max_error);
  EXPECT_LT(fit.max_error, 0.05);
}

// The fit minimises relative errors: a 10 ms micro-batch weighs as much as a
// 1 s one, so short micro-batches are predicted as well as long ones.
TEST(Calibrate, ShortMicroBatchesArePredictedAsWellAsLongOnes) {
  test::Rng rng(test::kSeed + 2);
  const SecondsCoefficients truth{1e-6, 1e-10, 1e-4, 0.005};
  auto records = test::synthetic_timings(truth, 100, 0.01, rng, 2, 256);       // ~10 ms each
  auto long_ones = test::synthetic_timings(truth, 100, 0.01, rng, 16, 16384);  // up to seconds
  records.insert(records.end(), long_ones.begin(), long_ones.end());
  const Workload fitted = calibrate(records);
  for (const auto& record : records) {
    const double error = std::abs(fitted.seconds(record.lengths) / model_seconds(truth, record.lengths) - 1);
    EXPECT_LT(error, 0.03) << "micro-batch of " << record.lengths.size() << " sequences";
  }
}

TEST(Calibrate, CoefficientsStayNonNegative) {
  test::Rng rng(test::kSeed + 3);
  // Timings linear in tokens only, with noise that an unconstrained fit would
  // pay for with small negative terms.
  const SecondsCoefficients truth{4e-6, 0, 0, 0};
  const Workload fitted = calibrate(test::synthetic_timings(truth, 200, 0.02, rng));
  const SecondsCoefficients& c = fitted.coefficients();
  for (double value : {c.per_token, c.per_token_squared, c.per_sequence, c.per_micro_batch}) EXPECT_GE(value, 0);
  expect_near_relative(c.per_token, truth.per_token, 0.05, "per_token");
}

// One sequence per micro-batch: per_sequence and per_micro_batch cannot be
// told apart; the fit still predicts the times.
TEST(Calibrate, CollinearFeaturesStillPredict) {
  test::Rng rng(test::kSeed + 4);
  const auto records = test::synthetic_timings(kTruth, 50, 0.0, rng, 1);
  const Workload fitted = calibrate(records);
  const SecondsCoefficients& c = fitted.coefficients();
  EXPECT_NEAR(c.per_sequence + c.per_micro_batch, kTruth.per_sequence + kTruth.per_micro_batch, 1e-9);
  for (const auto& record : records) EXPECT_NEAR(fitted.seconds(record.lengths), record.seconds, 1e-9);
}

// Attention-heavy timings on a kernel 8 wide whose ragged last block costs
// 20% more attention.
constexpr SecondsCoefficients kTruthAligned{2e-6, 3e-10, 5e-4, 0.02, 6e-11, 8};

TEST(Calibrate, WithAnAlignmentRecoversTheUnalignedTerm) {
  test::Rng rng(test::kSeed + 6);
  const auto records = test::synthetic_timings(kTruthAligned, 200, 0.0, rng);
  const Workload fitted = calibrate(records, {.alignment = 8});
  expect_recovers(fitted, kTruthAligned, 1e-6);
  expect_near_relative(fitted.coefficients().per_unaligned_token_squared, kTruthAligned.per_unaligned_token_squared,
                       1e-6, "per_unaligned_token_squared");
  EXPECT_EQ(fitted.coefficients().alignment, 8);
  EXPECT_LT(fitted.fit().max_error, 1e-9);
  // Without the term the same timings are mispriced: the long aligned ones and
  // the long unaligned ones cannot both fit.
  const Workload four_terms = calibrate(records);
  EXPECT_EQ(four_terms.coefficients().alignment, 1);
  EXPECT_EQ(four_terms.coefficients().per_unaligned_token_squared, 0);
  EXPECT_GT(four_terms.fit().max_error, 0.01);
}

TEST(Calibrate, AnAlignmentTheTimingsDoNotNeedStaysZero) {
  test::Rng rng(test::kSeed + 7);
  const auto records = test::synthetic_timings(kTruth, 64, 0.0, rng);
  const Workload fitted = calibrate(records, {.alignment = 8});
  expect_recovers(fitted, kTruth, 1e-6);
  EXPECT_EQ(fitted.coefficients().per_unaligned_token_squared, 0);
  EXPECT_EQ(fitted.coefficients().alignment, 8);
  for (const auto& record : records) EXPECT_NEAR(fitted.seconds(record.lengths), record.seconds, 1e-9);
}

TEST(Calibrate, AnAlignmentNoLengthMeetsStillPredicts) {
  // Every length odd: the unaligned L^2 column equals the L^2 one, so only
  // their sum can be fitted, and it predicts exactly.
  test::Rng rng(test::kSeed + 8);
  auto records = test::synthetic_timings(kTruthAligned, 64, 0.0, rng);
  for (auto& record : records) {
    for (int64_t& length : record.lengths) length |= 1;
    record.seconds = model_seconds(kTruthAligned, record.lengths);
  }
  const Workload fitted = calibrate(records, {.alignment = 8});
  const SecondsCoefficients& c = fitted.coefficients();
  EXPECT_NEAR(c.per_token_squared + c.per_unaligned_token_squared,
              kTruthAligned.per_token_squared + kTruthAligned.per_unaligned_token_squared, 1e-18);
  for (const auto& record : records) {
    EXPECT_NEAR(fitted.seconds(record.lengths), record.seconds, 1e-9 * record.seconds);
  }
}

TEST(Calibrate, TimingsThatDoNotGrowWithSequencesAreRejected) {
  std::vector<TimingRecord> records;
  for (int64_t i = 1; i <= 10; ++i)
    records.push_back({std::vector<int64_t>(static_cast<size_t>(i % 3 + 1), i * 100), 0.5});
  EXPECT_TRUE(throws_invalid([&] { calibrate(records); }, {"zero cost"}));
}

TEST(Calibrate, BadInputIsNamed) {
  test::Rng rng(test::kSeed + 5);
  const auto good = test::synthetic_timings(kTruth, 10, 0.0, rng);
  EXPECT_TRUE(throws_invalid([&] { calibrate(std::span(good).first(7)); }, {"7 records", "min_records = 8"}));
  auto with = [&](size_t index, TimingRecord record) {
    auto records = good;
    records[index] = std::move(record);
    return records;
  };
  for (double seconds : {0.0, -1.0, double{NAN}, double{INFINITY}}) {
    const auto records = with(3, {{10, 20}, seconds});
    EXPECT_TRUE(throws_invalid([&] { calibrate(records); }, {"records[3].seconds", "finite number > 0"})) << seconds;
  }
  const auto negative = with(6, {{10, -20}, 1.0});
  EXPECT_TRUE(throws_invalid([&] { calibrate(negative); }, {"records[6].lengths[1] = -20", "negative"}));
  const auto empty = with(2, {{}, 1.0});
  EXPECT_TRUE(throws_invalid([&] { calibrate(empty); }, {"records[2].lengths is empty"}));

  EXPECT_TRUE(throws_invalid([&] { calibrate(good, {.min_records = 3}); }, {"min_records = 3"}));
  EXPECT_TRUE(throws_invalid([&] { calibrate(good, {.outlier_threshold = 0}); }, {"outlier_threshold = 0"}));
  EXPECT_TRUE(throws_invalid([&] { calibrate(good, {.min_outlier_error = NAN}); }, {"min_outlier_error = nan"}));
  EXPECT_TRUE(throws_invalid([&] { calibrate(good, {.max_outlier_fraction = 0.5}); }, {"max_outlier_fraction = 0.5"}));
  for (int64_t alignment : {int64_t{0}, int64_t{-8}}) {
    EXPECT_TRUE(throws_invalid([&] { calibrate(good, {.alignment = alignment}); },
                               {"alignment = " + std::to_string(alignment), ">= 1"}));
  }
}

TEST(CalibratedWorkload, CostIsTheSequenceSecondsInPicoseconds) {
  const Workload w = Workload::calibrated(kTruth);
  for (int64_t length : {int64_t{0}, int64_t{1}, int64_t{777}, int64_t{32768}, int64_t{1} << 24}) {
    const auto l = static_cast<double>(length);
    const double seconds = kTruth.per_token * l + kTruth.per_token_squared * l * l + kTruth.per_sequence;
    EXPECT_EQ(w.cost(length), std::llround(seconds * 1e12)) << length;
  }
  EXPECT_FALSE(w.is_tokens());
  EXPECT_EQ(w.kind(), Workload::Kind::kCalibrated);
  EXPECT_NE(w.name().find("calibrated"), std::string::npos);
  EXPECT_TRUE(throws_invalid([&] { w.cost(int64_t{1} << 40); }, {"overflows int64"}));
  EXPECT_TRUE(throws_invalid([&] { w.cost(-1); }, {"-1"}));
}

TEST(CalibratedWorkload, UnalignedLengthsCostTheirExtraTerm) {
  const Workload w = Workload::calibrated(kTruthAligned);
  for (int64_t length : {int64_t{0}, int64_t{7}, int64_t{8}, int64_t{1016}, int64_t{1017}, int64_t{1023}}) {
    const auto l = static_cast<double>(length);
    const double squared =
        kTruthAligned.per_token_squared + (length % 8 != 0 ? kTruthAligned.per_unaligned_token_squared : 0.0);
    const double seconds = kTruthAligned.per_token * l + squared * l * l + kTruthAligned.per_sequence;
    EXPECT_EQ(w.cost(length), std::llround(seconds * 1e12)) << length;
  }
  EXPECT_GT(w.cost(1017), w.cost(1024));
  const std::vector<int64_t> lengths = {1016, 1017, 3};
  EXPECT_DOUBLE_EQ(w.seconds(lengths), model_seconds(kTruthAligned, lengths));
  EXPECT_NE(w.name().find("per_unaligned_token_squared=6e-11, alignment=8"), std::string::npos) << w.name();
  EXPECT_EQ(Workload::calibrated(kTruth).name().find("alignment"), std::string::npos);
  EXPECT_NE(w, Workload::calibrated(kTruth));
}

TEST(CalibratedWorkload, SecondsOfAMicroBatch) {
  const Workload w = Workload::calibrated(kTruth);
  const std::vector<int64_t> lengths = {100, 2000, 0};
  EXPECT_DOUBLE_EQ(w.seconds(lengths), model_seconds(kTruth, lengths));
  EXPECT_DOUBLE_EQ(w.seconds({}), kTruth.per_micro_batch);
  const std::vector<int64_t> negative = {5, -3};
  EXPECT_TRUE(throws_invalid([&] { w.seconds(negative); }, {"lengths[1] = -3"}));
  for (const Workload& other : {Workload::tokens(), Workload::verl(), Workload::quadratic(3, 2)}) {
    EXPECT_TRUE(throws_invalid([&] { other.seconds(lengths); }, {other.name(), "no seconds"}));
  }
}

TEST(CalibratedWorkload, CoefficientsMustBeFiniteAndNonNegative) {
  EXPECT_TRUE(throws_invalid([] { Workload::calibrated({-1e-6, 0, 0, 0}); }, {"per_token = -1e-06"}));
  EXPECT_TRUE(throws_invalid([] { Workload::calibrated({1e-6, NAN, 0, 0}); }, {"per_token_squared = nan"}));
  EXPECT_TRUE(throws_invalid([] { Workload::calibrated({1e-6, 0, INFINITY, 0}); }, {"per_sequence = inf"}));
  EXPECT_TRUE(throws_invalid([] { Workload::calibrated({1e-6, 0, 0, -2}); }, {"per_micro_batch = -2"}));
  EXPECT_TRUE(throws_invalid([] { Workload::calibrated({0, 0, 0, 1}); }, {"zero cost"}));
  EXPECT_TRUE(throws_invalid([] { Workload::calibrated({0, 0, 0, 1, 1e-12, 8}); }, {"zero cost"}));
  EXPECT_TRUE(throws_invalid(
      [] {
        Workload::calibrated({1e-6, 0, 0, 0, -1e-12, 8});
      },
      {"per_unaligned_token_squared = -1e-12"}));
  EXPECT_TRUE(throws_invalid(
      [] {
        Workload::calibrated({1e-6, 0, 0, 0, NAN, 8});
      },
      {"per_unaligned_token_squared = nan"}));
  EXPECT_TRUE(throws_invalid([] { Workload::calibrated({1e-6, 0, 0, 0, 0, 0}); }, {"alignment = 0", ">= 1"}));
  EXPECT_TRUE(throws_invalid(
      [] {
        Workload::calibrated({1e-6, 0, 0, 0, 1e-12, 1});
      },
      {"per_unaligned_token_squared = 1e-12", "alignment > 1"}));
}

TEST(WorkloadJson, EveryKindRoundTrips) {
  const FitReport fit{120, 7, 0.011, 0.031, 0.049};
  for (const Workload& w : {Workload::tokens(), Workload::verl(), Workload::quadratic(3, 2),
                            Workload::calibrated({1.0 / 3 * 1e-6, 2.5e-11, 1e-4, 0.01}, fit),
                            Workload::calibrated({1.0 / 3 * 1e-6, 2.5e-11, 1e-4, 0.01, 1.0 / 7 * 1e-11, 8}, fit),
                            Workload::calibrated({1e-6, 0, 0, 0, 0, 64})}) {
    const Workload back = Workload::from_json(w.to_json());
    EXPECT_EQ(back, w) << w.to_json();
    EXPECT_EQ(back.name(), w.name());
    EXPECT_EQ(back.kind(), w.kind());
    EXPECT_EQ(back.coefficients(), w.coefficients());
    EXPECT_EQ(back.fit().records, w.fit().records);
    EXPECT_EQ(back.fit().outliers, w.fit().outliers);
    EXPECT_EQ(back.fit().median_error, w.fit().median_error);
    EXPECT_EQ(back.fit().p90_error, w.fit().p90_error);
    EXPECT_EQ(back.fit().max_error, w.fit().max_error);
    EXPECT_EQ(back.cost(4321), w.cost(4321));
  }
}

TEST(WorkloadJson, BadModelsAreNamed) {
  const std::pair<const char*, std::vector<std::string_view>> cases[] = {
      {"not json", {"not valid JSON"}},
      {"[1]", {"expected an object"}},
      {R"({"kind":"tokens"})", {"lacks the key 'format'"}},
      {R"({"format":2,"kind":"tokens"})", {"'format' = 2"}},
      {R"({"format":"1","kind":"tokens"})", {"'format' = \"1\"", "not an integer"}},
      {R"({"format":1})", {"lacks the key 'kind'"}},
      {R"({"format":1,"kind":"cubic"})", {"'kind' = \"cubic\""}},
      {R"({"format":1,"kind":"tokens","a":1})", {"unknown key 'a'"}},
      {R"({"format":1,"kind":"quadratic","a":3})", {"lacks the key 'b'"}},
      {R"({"format":1,"kind":"quadratic","a":-3,"b":1})", {"a=-3"}},
      {R"({"format":1,"kind":"quadratic","a":1.5,"b":1})", {"'a' = 1.5", "not an integer"}},
      {R"({"format":1,"kind":"calibrated","per_token":1e-6,"per_token_squared":0,"per_sequence":0})",
       {"lacks the key 'per_micro_batch'"}},
      {R"({"format":1,"kind":"calibrated","per_token":"x","per_token_squared":0,"per_sequence":0,"per_micro_batch":0})",
       {"'per_token' = \"x\"", "not a number"}},
      {R"({"format":1,"kind":"calibrated","per_token":-1,"per_token_squared":0,"per_sequence":0,"per_micro_batch":0})",
       {"per_token = -1"}},
      {R"({"format":1,"kind":"calibrated","per_token":1,"per_token_squared":0,"per_sequence":0,"per_micro_batch":0,"fit":{"records":1}})",
       {"lacks the key 'outliers'"}},
      {R"({"format":1,"kind":"calibrated","per_token":1,"per_token_squared":0,"per_sequence":0,"per_micro_batch":0,"fit":{"records":1,"outliers":2,"median_error":0,"p90_error":0,"max_error":0}})",
       {"outliers = 2"}},
  };
  for (const auto& [text, fragments] : cases) {
    EXPECT_TRUE(test::throws_code([&] { Workload::from_json(text); }, ErrorCode::kInvalidArgument, fragments)) << text;
  }
}

TEST(WorkloadJson, TheAlignmentTermIsWrittenOnlyWhenThereIsOne) {
  const std::string four_terms = Workload::calibrated(kTruth).to_json();
  EXPECT_EQ(four_terms.find("alignment"), std::string::npos) << four_terms;
  // A model saved before the term existed loads as alignment 1.
  const Workload old = Workload::from_json(
      R"({"format":1,"kind":"calibrated","per_token":2e-6,"per_token_squared":3e-11,"per_sequence":5e-4,"per_micro_batch":0.02})");
  EXPECT_EQ(old, Workload::calibrated(kTruth));
  const std::string prefix =
      R"({"format":1,"kind":"calibrated","per_token":1e-6,"per_token_squared":0,"per_sequence":0,"per_micro_batch":0,)";
  const std::pair<std::string, std::vector<std::string_view>> cases[] = {
      {prefix + R"("alignment":8})", {"lacks the key 'per_unaligned_token_squared'"}},
      {prefix + R"("per_unaligned_token_squared":1e-12})", {"lacks the key 'alignment'"}},
      {prefix + R"("per_unaligned_token_squared":1e-12,"alignment":0})", {"alignment = 0"}},
      {prefix + R"("per_unaligned_token_squared":1e-12,"alignment":8.5})", {"'alignment' = 8.5", "not an integer"}},
      {prefix + R"("per_unaligned_token_squared":-1,"alignment":8})", {"per_unaligned_token_squared = -1"}},
  };
  for (const auto& [text, fragments] : cases) {
    EXPECT_TRUE(test::throws_code([&] { Workload::from_json(text); }, ErrorCode::kInvalidArgument, fragments)) << text;
  }
}

}  // namespace
}  // namespace seqflow
