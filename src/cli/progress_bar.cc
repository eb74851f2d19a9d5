#include "cli/progress_bar.h"

#include <algorithm>

#include "cli/table.h"

namespace seqflow::cli {

namespace {

constexpr int kBarWidth = 30;
constexpr size_t kPhaseWidth = 14;

}  // namespace

void ProgressBar::update(std::string_view phase, int64_t done, int64_t total) {
  const auto now = std::chrono::steady_clock::now();
  if (phase != phase_) {
    // A phase that ended without reaching its total still gets its own line.
    if (!phase_.empty()) out_ << "\n";
    phase_ = phase;
    percent_ = -1;
    phase_start_ = now;
  }
  const bool finished = done >= total;
  const int percent = finished ? 100 : static_cast<int>(static_cast<double>(done) * 100.0 / static_cast<double>(total));
  if (percent == percent_ && !finished) return;
  percent_ = percent;
  const int filled = percent * kBarWidth / 100;
  const double seconds = std::chrono::duration<double>(now - phase_start_).count();
  out_ << "\r" << phase << std::string(kPhaseWidth - std::min(kPhaseWidth - 1, phase.size()), ' ') << "["
       << std::string(static_cast<size_t>(filled), '#') << std::string(static_cast<size_t>(kBarWidth - filled), '.')
       << "] "
       << std::string(percent < 10    ? 2
                      : percent < 100 ? 1
                                      : 0,
                      ' ')
       << percent << "%  " << with_commas(done) << " / " << with_commas(total) << " " << unit_ << "  "
       << fixed(seconds, 1) << " s";
  if (finished) {
    out_ << "\n";
    phase_.clear();
  }
  out_.flush();
}

}  // namespace seqflow::cli
