// seqflow.balance: FitReport, calibrate and OnlineWorkload (seqflow/calibration.h).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>

#include "bindings/arguments.h"
#include "bindings/arrays.h"
#include "bindings/gil.h"
#include "bindings/submodules.h"
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
      "_calibrate",
      [](const std::vector<Int64Input>& lengths, const std::vector<double>& seconds, nb::handle min_records,
         double outlier_threshold, double min_outlier_error, double max_outlier_fraction) {
        std::vector<TimingRecord> records(lengths.size());
        for (size_t i = 0; i < records.size(); ++i) {
          const auto span = as_span(lengths[i]);
          records[i] = {{span.begin(), span.end()}, seconds[i]};
        }
        CalibrationOptions options{int_argument(min_records, "min_records"), outlier_threshold, min_outlier_error,
                                   max_outlier_fraction};
        GilReleased release;
        return calibrate(records, options);
      },
      "lengths"_a, "seconds"_a, "min_records"_a.none(), "outlier_threshold"_a, "min_outlier_error"_a,
      "max_outlier_fraction"_a);

  nb::class_<OnlineWorkload>(
      m, "OnlineWorkload",
      "A calibrated workload kept current from timings reported while training runs; a background thread\n"
      "refits on the latest `window` records. Until `min_records` are in, the workload is the prior.")
      .def(
          "__init__",
          [](OnlineWorkload* self, nb::handle prior, nb::handle window, nb::handle min_records) {
            OnlineOptions options;
            options.window = int_argument(window, "window");
            options.min_records = int_argument(min_records, "min_records");
            new (self) OnlineWorkload(workload_argument(prior), options);
          },
          "prior"_a.none() = "tokens", "window"_a.none() = 4096, "min_records"_a.none() = 16)
      .def(
          "_report",
          [](OnlineWorkload& online, const Int64Input& lengths, double seconds) {
            online.report(as_span(lengths), seconds);
          },
          "lengths"_a, "seconds"_a)
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
      .def("__repr__", [](const OnlineWorkload& online) {
        return "OnlineWorkload(reports=" + std::to_string(online.reports()) + ", workload=" + online.current().name() +
               ")";
      });
}

}  // namespace seqflow::bindings
