// OnlineWorkload: timings go into a bounded window under a mutex; one
// background thread refits on a copy of the window whenever records arrived
// since its last fit, outside the lock, and publishes the result.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "balance/calibration_checks.h"
#include "seqflow/calibration.h"
#include "seqflow/error.h"

namespace seqflow {

struct OnlineWorkload::State {
  State(Workload prior, OnlineOptions options) : options(options), current(std::move(prior)) {}

  void refit_loop() {
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return stopping || fitted < reported; });
      if (stopping) return;
      const int64_t target = reported;
      if (static_cast<int64_t>(window.size()) < options.min_records) {
        fitted = target;
        changed.notify_all();
        continue;
      }
      std::vector<TimingRecord> records(window.begin(), window.end());
      lock.unlock();
      std::optional<Workload> fit;
      try {
        fit = calibrate(records, options.calibration);
      } catch (const Error&) {
        // Timings no model of this form explains: the previous model stays.
      }
      lock.lock();
      if (fit) current = std::move(*fit);
      fitted = target;
      changed.notify_all();
    }
  }

  const OnlineOptions options;
  mutable std::mutex mutex;
  std::condition_variable changed;
  std::deque<TimingRecord> window;
  Workload current;
  int64_t reported = 0;  // records reported so far
  int64_t fitted = 0;    // records reported before the current fit's refit began
  bool stopping = false;
  std::thread refitter;  // last: starts after the members it uses exist
};

namespace {

// `options` checked, with the calibration's min_records set to its own.
OnlineOptions checked(OnlineOptions options) {
  if (options.min_records < calibration::kCoefficients) {
    throw_invalid("OnlineWorkload: min_records = " + std::to_string(options.min_records) +
                  " must be >= " + std::to_string(calibration::kCoefficients) + ", the number of coefficients");
  }
  if (options.window < options.min_records) {
    throw_invalid("OnlineWorkload: window = " + std::to_string(options.window) +
                  " must be >= min_records = " + std::to_string(options.min_records));
  }
  // The window fills to min_records before the first fit.
  options.calibration.min_records = options.min_records;
  calibration::check_options(options.calibration);
  return options;
}

void check_state(const OnlineWorkloadState& state, const OnlineOptions& options) {
  const auto window = static_cast<int64_t>(state.window.size());
  if (window > options.window) {
    throw_invalid("OnlineWorkload state: window holds " + std::to_string(window) +
                  " records, more than window = " + std::to_string(options.window));
  }
  if (state.reports < window) {
    throw_invalid("OnlineWorkload state: reports = " + std::to_string(state.reports) + " is fewer than the " +
                  std::to_string(window) + " records of the window");
  }
  if (state.refitted < 0 || state.refitted > state.reports) {
    throw_invalid("OnlineWorkload state: refitted = " + std::to_string(state.refitted) + " must be in 0.." +
                  std::to_string(state.reports));
  }
  for (size_t i = 0; i < state.window.size(); ++i) {
    calibration::check_timing(state.window[i].lengths, state.window[i].seconds,
                              "OnlineWorkload state: window[" + std::to_string(i) + "].");
  }
}

}  // namespace

OnlineWorkload::OnlineWorkload(Workload prior, OnlineOptions options)
    : OnlineWorkload(OnlineWorkloadState{std::move(prior), {}, 0, 0}, options) {}

OnlineWorkload::OnlineWorkload(const OnlineWorkloadState& resumed, OnlineOptions options) {
  options = checked(options);
  check_state(resumed, options);
  state_ = std::make_unique<State>(resumed.current, options);
  state_->window.assign(resumed.window.begin(), resumed.window.end());
  state_->reported = resumed.reports;
  state_->fitted = resumed.refitted;
  state_->refitter = std::thread([state = state_.get()] { state->refit_loop(); });
}

OnlineWorkload::~OnlineWorkload() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->changed.notify_all();
  state_->refitter.join();
}

void OnlineWorkload::report(std::span<const int64_t> lengths, double seconds) {
  calibration::check_timing(lengths, seconds, "");
  TimingRecord record{{lengths.begin(), lengths.end()}, seconds};
  {
    std::lock_guard lock(state_->mutex);
    state_->window.push_back(std::move(record));
    if (static_cast<int64_t>(state_->window.size()) > state_->options.window) state_->window.pop_front();
    ++state_->reported;
  }
  state_->changed.notify_all();
}

Workload OnlineWorkload::current() const {
  std::lock_guard lock(state_->mutex);
  return state_->current;
}

int64_t OnlineWorkload::reports() const {
  std::lock_guard lock(state_->mutex);
  return state_->reported;
}

OnlineWorkloadState OnlineWorkload::state() const {
  std::lock_guard lock(state_->mutex);
  return OnlineWorkloadState{
      state_->current, {state_->window.begin(), state_->window.end()}, state_->reported, state_->fitted};
}

void OnlineWorkload::wait_for_refit() {
  std::unique_lock lock(state_->mutex);
  const int64_t target = state_->reported;
  state_->changed.wait(lock, [&] { return state_->fitted >= target; });
}

}  // namespace seqflow
