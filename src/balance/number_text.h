// A double as the shortest text that reads back as the same value ("1e-07",
// "nan", "-0.5"), for error messages.
#pragma once

#include <charconv>
#include <string>

namespace seqflow::calibration {

inline std::string number_text(double value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

}  // namespace seqflow::calibration
