#include "balance/calibration_checks.h"

#include <cmath>
#include <string>

#include "balance/number_text.h"
#include "seqflow/error.h"

namespace seqflow::calibration {

void check_timing(std::span<const int64_t> lengths, double seconds, std::string_view prefix) {
  const std::string where(prefix);
  if (!std::isfinite(seconds) || seconds <= 0) {
    throw_invalid(where + "seconds = " + number_text(seconds) + " must be a finite number > 0");
  }
  if (lengths.empty()) throw_invalid(where + "lengths is empty: a timed micro-batch holds at least one sequence");
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0) {
      throw_invalid(where + "lengths[" + std::to_string(i) + "] = " + std::to_string(lengths[i]) +
                    " is negative; lengths must be >= 0");
    }
  }
}

void check_options(const CalibrationOptions& options) {
  if (options.min_records < kCoefficients) {
    throw_invalid("calibrate: min_records = " + std::to_string(options.min_records) + " is below " +
                  std::to_string(kCoefficients) + ", the number of coefficients");
  }
  if (!(options.outlier_threshold > 0) || !std::isfinite(options.outlier_threshold)) {
    throw_invalid("calibrate: outlier_threshold = " + number_text(options.outlier_threshold) +
                  " must be a finite number > 0");
  }
  if (!(options.min_outlier_error >= 0) || !std::isfinite(options.min_outlier_error)) {
    throw_invalid("calibrate: min_outlier_error = " + number_text(options.min_outlier_error) +
                  " must be a finite number >= 0");
  }
  if (options.alignment < 1) {
    throw_invalid("calibrate: alignment = " + std::to_string(options.alignment) +
                  " must be >= 1 (1: no term for unaligned lengths)");
  }
  if (!(options.max_outlier_fraction >= 0 && options.max_outlier_fraction < 0.5)) {
    throw_invalid("calibrate: max_outlier_fraction = " + number_text(options.max_outlier_fraction) +
                  " must be in [0, 0.5)");
  }
}

}  // namespace seqflow::calibration
