// The checks of calibrate()'s input, shared with OnlineWorkload.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "seqflow/calibration.h"

namespace seqflow::calibration {

// The coefficients a fit finds without an alignment term, so the fewest
// records it can use.
inline constexpr int64_t kCoefficients = 4;

// Throws kInvalidArgument unless `lengths` is non-empty with every length
// >= 0 and `seconds` is finite and > 0. Messages start with `prefix`
// ("records[3]." or ""), e.g. "records[3].lengths[1] = -2 is negative".
void check_timing(std::span<const int64_t> lengths, double seconds, std::string_view prefix);

}  // namespace seqflow::calibration

namespace seqflow::calibration {

// Throws kInvalidArgument naming the option and its value.
void check_options(const CalibrationOptions& options);

}  // namespace seqflow::calibration
