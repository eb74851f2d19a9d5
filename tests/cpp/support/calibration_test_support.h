// Synthetic timings for the calibration tests: micro-batches timed by known
// coefficients, so a fit's result can be checked against them.
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include "seqflow/calibration.h"

namespace seqflow::test {

inline double model_seconds(const SecondsCoefficients& c, const std::vector<int64_t>& lengths) {
  double total = c.per_micro_batch;
  for (int64_t length : lengths) {
    const auto l = static_cast<double>(length);
    const double squared = c.per_token_squared + (length % c.alignment != 0 ? c.per_unaligned_token_squared : 0.0);
    total += c.per_token * l + squared * l * l + c.per_sequence;
  }
  return total;
}

// Micro-batches of 1..max_sequences sequences of 16..max_length tokens
// (log-uniform), timed by `truth` with relative Gaussian noise.
inline std::vector<TimingRecord> synthetic_timings(const SecondsCoefficients& truth, size_t count, double noise,
                                                   std::mt19937_64& rng, int64_t max_sequences = 16,
                                                   double max_length = 8192) {
  std::uniform_int_distribution<int64_t> sequences(1, max_sequences);
  std::uniform_real_distribution<double> log_length(std::log(16.0), std::log(max_length));
  std::normal_distribution<double> relative(0.0, noise);
  std::vector<TimingRecord> out(count);
  for (TimingRecord& record : out) {
    for (int64_t s = sequences(rng); s > 0; --s) {
      record.lengths.push_back(static_cast<int64_t>(std::exp(log_length(rng))));
    }
    record.seconds = model_seconds(truth, record.lengths) * (1 + (noise > 0 ? relative(rng) : 0));
  }
  return out;
}

inline bool near_relative(double actual, double expected, double tolerance) {
  return std::abs(actual - expected) <= tolerance * std::abs(expected);
}

}  // namespace seqflow::test
