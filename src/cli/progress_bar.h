// A one-line progress bar per phase of long work, for standard error: redrawn
// in place ('\r') as its percentage changes, ended with a newline when the
// phase is done, so that finished phases stay on screen above what follows.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace seqflow::cli {

class ProgressBar {
 public:
  // `unit` names what is counted ("samples").
  ProgressBar(std::ostream& out, std::string unit) : out_(out), unit_(std::move(unit)) {}

  // `done` of `total` through `phase`; a new phase name starts a new line.
  void update(std::string_view phase, int64_t done, int64_t total);

 private:
  std::ostream& out_;
  std::string unit_;
  std::string phase_;  // the phase on the current line; empty after a finished one
  int percent_ = -1;   // drawn on the current line
  std::chrono::steady_clock::time_point phase_start_;
};

}  // namespace seqflow::cli
