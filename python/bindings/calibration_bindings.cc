// seqflow.balance: FitReport, calibrate and OnlineWorkload (seqflow/calibration.h).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <string>
#include <utility>

#include "bindings/arguments.h"
#include "bindings/arrays.h"
#include "bindings/gil.h"
#include "bindings/submodules.h"
#include "bindings/timing_records.h"
#include "seqflow/calibration.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

std::string fit_repr(const FitReport& f) {
  char text[200];
  std::snprintf(
      text, sizeof text, "FitReport(records=%lld, outliers=%lld, median_error=%.3g, p90_error=%.3g, max_error=%.3g)",
      static_cast<long long>(f.records), static_cast<long long>(f.outliers), f.median_error, f.p90_error, f.max_error);
  return text;
}

}  // namespace

void bind_calibration(nb::module_ m) {
  nb::class_<FitReport>(m, "FitReport",
                        "How well a calibrated workload predicts the timings it was fitted on: relative errors\n"
                        "|predicted - measured| / measured of the records kept (outliers left out).")
      .def_ro("records", &FitReport::records)
      .def_ro("outliers", &FitReport::outliers)
      .def_ro("median_error", &FitReport::median_error)
      .def_ro("p90_error", &FitReport::p90_error)
      .def_ro("max_error", &FitReport::max_error)
      .def("__repr__", &fit_repr)
      .attr("__module__") = "seqflow.balance";

  m.def(
      "calibrate",
      [](const std::vector<Int64Input>& lengths, const std::vector<double>& seconds, int64_t min_records,
         double outlier_threshold, double min_outlier_error, double max_outlier_fraction, int64_t alignment) {
        const std::vector<TimingRecord> timings = timing_records(lengths, seconds);
        const CalibrationOptions options{min_records, outlier_threshold, min_outlier_error, max_outlier_fraction,
                                         alignment};
        GilReleased release;
        return calibrate(timings, options);
      },
      "lengths"_a, "seconds"_a, "min_records"_a, "outlier_threshold"_a, "min_outlier_error"_a, "max_outlier_fraction"_a,
      "alignment"_a,
      "seqflow.balance.calibrate with the records as columns: lengths[i] and seconds[i] of micro-batch i.");

  nb::class_<OnlineWorkload>(m, "OnlineWorkload",
                             "A calibrated workload kept current from timings reported while\n"
                             "training runs. report() is thread-safe and cheap; a background thread\n"
                             "refits on the latest `window` records. `workload` is the current model\n"
                             "(the prior until `min_records` records are in); pass the OnlineWorkload\n"
                             "itself wherever workload= is taken, and the call uses that snapshot.")
      .def(
          "__init__",
          [](OnlineWorkload* self, const Workload& prior, int64_t window, int64_t min_records, int64_t alignment) {
            OnlineOptions options;
            options.window = window;
            options.min_records = min_records;
            options.calibration.alignment = alignment;
            new (self) OnlineWorkload(prior, options);
          },
          "prior"_a, "window"_a, "min_records"_a, "alignment"_a,
          "seqflow.balance.OnlineWorkload (a subclass) converts its arguments to these.")
      .def(
          "report",
          [](OnlineWorkload& online, const Int64Input& lengths, double seconds) {
            online.report(as_span(lengths), seconds);
          },
          "lengths"_a, "seconds"_a, "One measured micro-batch: its sequence lengths and seconds.")
      .def_prop_ro("workload", &OnlineWorkload::current, "The current model (a snapshot).")
      .def_prop_ro(
          "fit", [](const OnlineWorkload& online) { return online.current().fit(); },
          "The current model's FitReport (records 0 while the prior is current).")
      .def_prop_ro("reports", &OnlineWorkload::reports)
      .def(
          "wait_for_refit",
          [](OnlineWorkload& online) {
            GilReleased release;
            online.wait_for_refit();
          },
          "Blocks until every record reported so far is in the current fit.")
      .def("__repr__",
           [](const OnlineWorkload& online) {
             return "OnlineWorkload(reports=" + std::to_string(online.reports()) +
                    ", workload=" + online.current().name() + ")";
           })
      .attr("__module__") = "seqflow.balance";
}

}  // namespace seqflow::bindings
