// calibrate(): a robust, relative-error, non-negative least-squares fit of
// seconds = per_token * sum(L) + per_token_squared * sum(L^2) +
//           per_sequence * (#sequences) + per_micro_batch
//           [+ per_unaligned_token_squared * sum(L^2 of L not a multiple of the alignment)].
//
// Each record's row is its features divided by its measured seconds, with
// target 1, so the residual is the relative error predicted / measured - 1.
// Non-negativity: with at most 5 coefficients, the least-squares solution on
// every subset of them (31 and the empty one) is cheap; the best one whose
// coefficients are all >= 0 is the NNLS optimum (which is the unconstrained
// fit on its own support). Outliers (warm-up steps, stragglers) are the
// records whose relative error is far, in robust standard deviations, from
// the median; the fit is repeated without them until they settle.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "balance/number_text.h"
#include "balance/calibration_checks.h"
#include "seqflow/calibration.h"
#include "seqflow/error.h"

namespace seqflow {

namespace {

// sum L, sum L^2, #sequences, 1, sum L^2 of unaligned L (a zero column, so
// never fitted, without an alignment).
constexpr int kFeatures = calibration::kCoefficients + 1;
constexpr int kMaxRounds = 20;
// A scaled Gram matrix pivot below this means the subset's columns are
// (nearly) collinear, e.g. #sequences and 1 when every micro-batch holds one
// sequence: that subset is skipped, a smaller one fits as well.
constexpr double kCollinearPivot = 1e-10;
// Squared relative error per record that a larger subset of coefficients
// must save to be preferred over a smaller one.
constexpr double kRoundingMargin = 1e-20;
// 1.4826 * MAD estimates a normal distribution's standard deviation.
constexpr double kMadToSigma = 1.4826;

using Vector = std::array<double, kFeatures>;

Vector row_of(const TimingRecord& record, int64_t alignment) {
  Vector row{0, 0, static_cast<double>(record.lengths.size()), 1, 0};
  for (int64_t length : record.lengths) {
    const auto l = static_cast<double>(length);
    row[0] += l;
    row[1] += l * l;
    if (length % alignment != 0) row[4] += l * l;
  }
  for (double& value : row) value /= record.seconds;
  return row;
}

double predicted_ratio(const Vector& row, const Vector& coefficients) {
  double sum = 0;
  for (int j = 0; j < kFeatures; ++j) sum += row[j] * coefficients[j];
  return sum;
}

// Least squares of the columns in `mask` (scaled Gram matrix `gram`,
// right-hand side `rhs`), by Gaussian elimination with partial pivoting.
// nullopt when the columns are collinear.
std::optional<Vector> solve_subset(const std::array<Vector, kFeatures>& gram, const Vector& rhs, unsigned mask) {
  std::array<int, kFeatures> columns{};
  int n = 0;
  for (int j = 0; j < kFeatures; ++j) {
    if (mask & (1u << j)) columns[n++] = j;
  }
  std::array<std::array<double, kFeatures + 1>, kFeatures> m{};
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) m[r][c] = gram[columns[r]][columns[c]];
    m[r][n] = rhs[columns[r]];
  }
  for (int p = 0; p < n; ++p) {
    int best = p;
    for (int r = p + 1; r < n; ++r) {
      if (std::abs(m[r][p]) > std::abs(m[best][p])) best = r;
    }
    if (std::abs(m[best][p]) < kCollinearPivot) return std::nullopt;
    std::swap(m[p], m[best]);
    for (int r = p + 1; r < n; ++r) {
      const double factor = m[r][p] / m[p][p];
      for (int c = p; c <= n; ++c) m[r][c] -= factor * m[p][c];
    }
  }
  Vector out{};
  for (int p = n - 1; p >= 0; --p) {
    double value = m[p][n];
    for (int c = p + 1; c < n; ++c) value -= m[p][c] * out[columns[c]];
    out[columns[p]] = value / m[p][p];
  }
  return out;
}

// Non-negative least squares of rows . x = 1 over the kept rows.
Vector nnls(const std::vector<Vector>& rows, const std::vector<bool>& kept) {
  // Columns scaled to unit norm keep the Gram matrix well conditioned
  // (sum L^2 is ~1e9 times #sequences).
  Vector scale{};
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!kept[i]) continue;
    for (int j = 0; j < kFeatures; ++j) scale[j] += rows[i][j] * rows[i][j];
  }
  unsigned usable = 0;
  for (int j = 0; j < kFeatures; ++j) {
    scale[j] = std::sqrt(scale[j]);
    if (scale[j] > 0) usable |= 1u << j;
  }
  std::array<Vector, kFeatures> gram{};
  Vector rhs{};
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!kept[i]) continue;
    Vector scaled{};
    for (int j = 0; j < kFeatures; ++j) scaled[j] = scale[j] > 0 ? rows[i][j] / scale[j] : 0;
    for (int a = 0; a < kFeatures; ++a) {
      rhs[a] += scaled[a];
      for (int b = 0; b < kFeatures; ++b) gram[a][b] += scaled[a] * scaled[b];
    }
  }
  // Fewer coefficients first; more win only by a margin beyond rounding, so
  // exact data keeps its exact zeros.
  std::array<unsigned, 1u << kFeatures> masks{};
  for (unsigned mask = 0; mask < masks.size(); ++mask) masks[mask] = mask;
  std::stable_sort(masks.begin(), masks.end(),
                   [](unsigned a, unsigned b) { return std::popcount(a) < std::popcount(b); });
  const double margin = kRoundingMargin * static_cast<double>(rows.size());
  Vector best{};
  double best_residual = INFINITY;
  for (unsigned mask : masks) {
    if ((mask & ~usable) != 0) continue;
    const std::optional<Vector> solved = mask == 0 ? Vector{} : solve_subset(gram, rhs, mask);
    if (!solved || std::any_of(solved->begin(), solved->end(), [](double x) { return x < 0; })) continue;
    Vector coefficients{};
    for (int j = 0; j < kFeatures; ++j) coefficients[j] = scale[j] > 0 ? (*solved)[j] / scale[j] : 0;
    double residual = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!kept[i]) continue;
      const double error = predicted_ratio(rows[i], coefficients) - 1;
      residual += error * error;
    }
    if (residual < best_residual - margin) {
      best_residual = residual;
      best = coefficients;
    }
  }
  return best;
}

double median_of(std::vector<double> values) {
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle), values.end());
  double out = values[middle];
  if (values.size() % 2 == 0) out = (out + *std::max_element(values.begin(), values.begin() + middle)) / 2;
  return out;
}

// Which records the fit keeps, given every record's relative error.
std::vector<bool> inliers(const std::vector<double>& errors, const CalibrationOptions& options) {
  const double center = median_of(errors);
  std::vector<double> deviations;
  for (double error : errors) deviations.push_back(std::abs(error - center));
  const double sigma = kMadToSigma * median_of(deviations);
  const size_t n = errors.size();
  const size_t fitted = options.alignment > 1 ? kFeatures : calibration::kCoefficients;
  const auto cap =
      std::min(static_cast<size_t>(options.max_outlier_fraction * static_cast<double>(n)), n > fitted ? n - fitted : 0);
  std::vector<size_t> outliers;
  for (size_t i = 0; i < n; ++i) {
    if (deviations[i] > options.outlier_threshold * sigma && std::abs(errors[i]) > options.min_outlier_error) {
      outliers.push_back(i);
    }
  }
  // Too many: only the farthest go.
  std::stable_sort(outliers.begin(), outliers.end(), [&](size_t a, size_t b) { return deviations[a] > deviations[b]; });
  if (outliers.size() > cap) outliers.resize(cap);
  std::vector<bool> kept(n, true);
  for (size_t i : outliers) kept[i] = false;
  return kept;
}

FitReport report_of(const std::vector<double>& errors, const std::vector<bool>& kept) {
  std::vector<double> absolute;
  for (size_t i = 0; i < errors.size(); ++i) {
    if (kept[i]) absolute.push_back(std::abs(errors[i]));
  }
  std::sort(absolute.begin(), absolute.end());
  FitReport report;
  report.records = static_cast<int64_t>(errors.size());
  report.outliers = report.records - static_cast<int64_t>(absolute.size());
  report.median_error = median_of(absolute);
  // Nearest rank: the smallest error at least 90% of the kept records reach.
  const auto rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(absolute.size())));
  report.p90_error = absolute[std::max<size_t>(rank, 1) - 1];
  report.max_error = absolute.back();
  return report;
}

}  // namespace

Workload calibrate(std::span<const TimingRecord> records, const CalibrationOptions& options) {
  calibration::check_options(options);
  for (size_t i = 0; i < records.size(); ++i) {
    calibration::check_timing(records[i].lengths, records[i].seconds, "records[" + std::to_string(i) + "].");
  }
  if (static_cast<int64_t>(records.size()) < options.min_records) {
    throw_invalid("calibrate: " + std::to_string(records.size()) +
                  " records, fewer than min_records = " + std::to_string(options.min_records));
  }
  std::vector<Vector> rows;
  rows.reserve(records.size());
  for (const TimingRecord& record : records) rows.push_back(row_of(record, options.alignment));

  std::vector<bool> kept(rows.size(), true);
  std::vector<double> errors(rows.size());
  Vector coefficients{};
  for (int round = 1;; ++round) {
    coefficients = nnls(rows, kept);
    for (size_t i = 0; i < rows.size(); ++i) errors[i] = predicted_ratio(rows[i], coefficients) - 1;
    if (round == kMaxRounds) break;
    std::vector<bool> next = inliers(errors, options);
    if (next == kept) break;
    kept = std::move(next);
  }
  if (coefficients[0] == 0 && coefficients[1] == 0 && coefficients[2] == 0) {
    throw_invalid(
        "calibrate: the best fit gives every sequence zero cost (the timings do not grow with the micro-batches' "
        "sequences)");
  }
  // Without an alignment the fifth column is all zeros, so coefficients[4] is 0.
  return Workload::calibrated(
      {coefficients[0], coefficients[1], coefficients[2], coefficients[3], coefficients[4], options.alignment},
      report_of(errors, kept));
}

}  // namespace seqflow
