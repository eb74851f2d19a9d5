// Workload models: the cost of one sequence of length L, used as the weight
// that balancing evens out. Token balance is not compute balance once
// attention's L*L term matters, and only measured times say what a sequence
// costs on given hardware: a calibrated model (calibration.h fits one) holds
// coefficients in seconds.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace seqflow {

// How well a calibrated model predicts the timings it was fitted on: relative
// errors |predicted - measured| / measured of the records kept (not outliers).
struct FitReport {
  int64_t records = 0;   // records given to the fit
  int64_t outliers = 0;  // records left out as outliers (warm-up steps, stragglers)
  double median_error = 0;
  double p90_error = 0;
  double max_error = 0;
};

// A calibrated model's coefficients, in seconds, all finite and >= 0. One
// micro-batch of sequences L_1..L_n takes per_micro_batch + sum over i of
// (per_token * L_i + per_token_squared * L_i^2 + per_sequence), plus
// per_unaligned_token_squared * L_i^2 for each L_i not a multiple of
// `alignment`: attention kernels vectorised over a block of positions (torch's
// on CPU, 8 wide with AVX2) take a slower path on a ragged last block.
// alignment 1 (every length aligned) leaves that term out.
struct SecondsCoefficients {
  double per_token = 0;
  double per_token_squared = 0;
  double per_sequence = 0;
  double per_micro_batch = 0;
  double per_unaligned_token_squared = 0;
  int64_t alignment = 1;
  bool operator==(const SecondsCoefficients&) const = default;
};

class Workload {
 public:
  enum class Kind { kTokens, kVerl, kQuadratic, kCalibrated, kOnline };

  // cost = L
  static Workload tokens();
  // verl's model of a 4096-hidden transformer: 24576 * L + L * L
  static Workload verl();
  // cost = a * L + b * L * L, with a, b >= 0
  static Workload quadratic(int64_t a, int64_t b);
  // cost = a sequence's seconds in picoseconds, rounded. Throws unless every
  // coefficient is finite and >= 0 and a sequence costs something.
  static Workload calibrated(const SecondsCoefficients& coefficients, const FitReport& fit = {});
  // The task's measured workload: a sampler given it balances the model the
  // controller fits to the timings the task's ranks report
  // (ControlPlane::report_timing); until that fit exists, and anywhere else,
  // it costs as tokens.
  static Workload online();
  // "tokens", "verl", "quadratic(a,b)", "quadratic:a,b" or "online".
  static Workload parse(std::string_view spec);
  // Any kind, as to_json() writes it; errors name the bad key or value.
  static Workload from_json(std::string_view text);

  // Cost of one length; throws on a negative length or on int64 overflow.
  int64_t cost(int64_t length) const;
  // Costs of many lengths; names the parameter and index on error.
  std::vector<int64_t> costs(std::span<const int64_t> lengths, std::string_view parameter = "weights") const;
  // The sum of costs() of some items; throws, naming the parameter, when it
  // exceeds kMaxTotalCost.
  int64_t total(std::span<const int64_t> costs, std::string_view parameter = "weights") const;
  // The largest total workload: balancing compares doubled sums, so totals
  // keep that headroom below int64's range.
  static constexpr int64_t kMaxTotalCost = INT64_MAX / 4;
  // Calibrated costs are in these units per second.
  static constexpr double kCostUnitsPerSecond = 1e12;

  // Predicted seconds of one micro-batch of these lengths (calibrated only;
  // throws, naming the workload, for the other kinds).
  double seconds(std::span<const int64_t> lengths) const;

  Kind kind() const { return kind_; }
  bool is_tokens() const { return kind_ == Kind::kTokens; }
  // The integer coefficients a, b of tokens, verl and quadratic (0 for calibrated).
  int64_t linear() const { return a_; }
  int64_t quadratic_term() const { return b_; }
  // The coefficients of a calibrated model (all 0 for the other kinds).
  const SecondsCoefficients& coefficients() const { return seconds_; }
  // The fit a calibrated model came from (all 0 for the other kinds).
  const FitReport& fit() const { return fit_; }
  std::string name() const;
  std::string to_json() const;

  // Same kind and coefficients (the fit report is not compared).
  bool operator==(const Workload& other) const;

 private:
  Workload(Kind kind, int64_t a, int64_t b) : kind_(kind), a_(a), b_(b) {}
  std::optional<int64_t> checked_cost(int64_t length) const;
  double sequence_seconds(int64_t length) const;
  Kind kind_;
  int64_t a_;
  int64_t b_;
  SecondsCoefficients seconds_{};
  FitReport fit_{};
};

}  // namespace seqflow
