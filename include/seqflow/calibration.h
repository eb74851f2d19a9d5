// Calibrated workload models: fit seconds = per_micro_batch + sum over the
// micro-batch's sequences of (per_token * L + per_token_squared * L^2 +
// per_sequence), with an optional term for lengths that are not a multiple
// of an alignment, to measured times, and keep such a fit current while
// training runs (OnlineWorkload). FitReport and the calibrated Workload
// itself are in workload.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "seqflow/workload.h"

namespace seqflow {

// One measured micro-batch (or pack): its sequences' lengths and its seconds.
struct TimingRecord {
  std::vector<int64_t> lengths;
  double seconds = 0;
};

struct CalibrationOptions {
  // Fewest records a fit accepts (>= 4, the number of coefficients).
  int64_t min_records = 8;
  // A record is an outlier when its relative error is beyond
  // outlier_threshold robust standard deviations (1.4826 * the median
  // absolute deviation) of the relative errors ...
  double outlier_threshold = 3.5;
  // ... and beyond this relative error (so a near-exact fit flags nothing).
  double min_outlier_error = 0.05;
  // At most this fraction of the records are left out as outliers.
  double max_outlier_fraction = 0.4;
  // > 1: also fit per_unaligned_token_squared, the extra L^2 seconds of a
  // sequence whose length is not a multiple of this (see SecondsCoefficients;
  // 8 for torch's CPU attention with AVX2). The records need long sequences
  // of both kinds for it to be told apart from per_token_squared.
  int64_t alignment = 1;
};

// Non-negative least squares on relative errors (a 10 ms micro-batch counts
// as much as a 1 s one), refitted without the outliers until they settle.
// Throws kInvalidArgument naming the record on bad input (negative length,
// empty micro-batch, seconds not finite and > 0), on too few records, and
// when the fit gives every sequence zero cost.
Workload calibrate(std::span<const TimingRecord> records, const CalibrationOptions& options = {});

struct OnlineOptions {
  int64_t window = 4096;     // the latest records each refit uses
  int64_t min_records = 16;  // the prior stays current until this many are in
  CalibrationOptions calibration = {};
};

// What an OnlineWorkload has learned: enough for another to answer as it
// does and go on learning as it would (a controller checkpoint holds one per
// task).
struct OnlineWorkloadState {
  Workload current = Workload::tokens();  // current(): the latest fit or the prior
  std::vector<TimingRecord> window;       // the latest records, oldest first
  int64_t reports = 0;                    // reports()
  // Reports the current model has taken into account (a refit of the
  // window, or too few records for one); a refit of the others was pending.
  int64_t refitted = 0;
};

// A calibrated workload kept current from timings reported while training
// runs. report() is thread-safe and cheap: a background thread refits on the
// latest `window` records. A refit that fails (say, timings that do not grow
// with length) keeps the previous model.
class OnlineWorkload {
 public:
  explicit OnlineWorkload(Workload prior = Workload::tokens(), OnlineOptions options = {});
  // Resumes from `state` (a pending refit runs). Throws kInvalidArgument,
  // naming the field, for a state no OnlineWorkload with `options` has: a bad
  // record, a window longer than options.window or than reports, refitted
  // outside 0..reports.
  OnlineWorkload(const OnlineWorkloadState& state, OnlineOptions options);
  ~OnlineWorkload();
  OnlineWorkload(const OnlineWorkload&) = delete;
  OnlineWorkload& operator=(const OnlineWorkload&) = delete;

  // Throws kInvalidArgument as calibrate() does for a bad record.
  void report(std::span<const int64_t> lengths, double seconds);
  // The latest fit (calibrated), or the prior until min_records records are in.
  Workload current() const;
  int64_t reports() const;
  // A consistent snapshot of everything above.
  OnlineWorkloadState state() const;
  // Blocks until every record reported so far is in the current fit (or its
  // refit has failed).
  void wait_for_refit();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace seqflow
