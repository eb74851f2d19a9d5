// seqflow.balance: FitReport, calibrate and OnlineWorkload (seqflow/calibration.h).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <string>
#include <utility>

#include "bindings/arguments.h"
#include "bindings/arrays.h"
#include "bindings/checks.h"
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

// A measured time as a float (numpy and torch scalars too); the engine
// checks it is finite and > 0.
double seconds_value(nb::handle value, const std::string& name) {
  nb::object number = nb::borrow(value);
  if (nb::hasattr(value, "item") && nb::getattr(value, "ndim", nb::none()).equal(nb::int_(0))) {
    number = value.attr("item")();
  }
  static CachedAttribute real("numbers", "Real");
  if (PyBool_Check(number.ptr()) || PyObject_IsInstance(number.ptr(), real.ptr()) != 1) {
    throw nb::value_error((name + " must be a number of seconds, got " + short_repr(number)).c_str());
  }
  return nb::cast<double>(nb::float_(number));
}

// records[index]: a (lengths, seconds) pair or {"lengths": ..., "seconds": ...}.
std::pair<nb::object, double> timing_record(nb::handle record, size_t index) {
  const std::string where = "records[" + std::to_string(index) + "]";
  nb::object lengths;
  nb::object seconds;
  if (PyDict_Check(record.ptr())) {
    if (nb::len(record) != 2 || !nb::cast<nb::dict>(record).contains("lengths") ||
        !nb::cast<nb::dict>(record).contains("seconds")) {
      nb::list keys;
      for (nb::handle key : record) keys.append(nb::str(key));
      keys.sort();
      throw nb::value_error((where + " must have the keys 'lengths' and 'seconds', got " + repr_text(keys)).c_str());
    }
    lengths = record["lengths"];
    seconds = record["seconds"];
  } else if ((PyTuple_Check(record.ptr()) || PyList_Check(record.ptr())) && nb::len(record) == 2) {
    lengths = record[0];
    seconds = record[1];
  } else {
    throw nb::value_error(
        (where + " must be a (lengths, seconds) pair or a dict with 'lengths' and 'seconds', got " + short_repr(record))
            .c_str());
  }
  return {as_int64_array(lengths, where + ".lengths", true), seconds_value(seconds, where + ".seconds")};
}

// The lengths arrays and the seconds of the user's timing records.
std::pair<nb::list, std::vector<double>> timing_columns(nb::handle records) {
  nb::list lengths;
  std::vector<double> seconds;
  size_t index = 0;
  for (nb::handle record : records) {
    auto [array, time] = timing_record(record, index++);
    lengths.append(array);
    seconds.push_back(time);
  }
  return {lengths, seconds};
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

  m.def("timing_columns", &timing_columns, "records"_a.none(),
        "The lengths arrays and the seconds of timing records: an iterable of\n"
        "(lengths, seconds) pairs or {\"lengths\": ..., \"seconds\": ...} dicts.",
        nb::sig("def timing_columns(records) -> tuple[list, list]"));
  m.def(
      "calibrate",
      [](nb::handle records, nb::handle min_records, nb::handle outlier_threshold, nb::handle min_outlier_error,
         nb::handle max_outlier_fraction, nb::handle alignment) {
        const auto [lengths, seconds] = timing_columns(records);
        const std::vector<TimingRecord> timings = timing_records(nb::cast<std::vector<Int64Input>>(lengths), seconds);
        // float() as Python spells it (a numeric string too), before the engine checks the ranges.
        const auto number = [](nb::handle value) { return nb::cast<double>(nb::float_(value)); };
        const double threshold = number(outlier_threshold);
        const double min_error = number(min_outlier_error);
        const double max_fraction = number(max_outlier_fraction);
        const CalibrationOptions options{int_argument(min_records, "min_records"), threshold, min_error, max_fraction,
                                         int_argument(alignment, "alignment")};
        GilReleased release;
        return calibrate(timings, options);
      },
      "records"_a.none(), nb::kw_only(), "min_records"_a.none() = 8, "outlier_threshold"_a.none() = 3.5,
      "min_outlier_error"_a.none() = 0.05, "max_outlier_fraction"_a.none() = 0.4, "alignment"_a.none() = 1,
      "Fit a calibrated Workload to measured times.\n\n"
      "records: an iterable of (lengths, seconds) pairs or {\"lengths\": ...,\n"
      "    \"seconds\": ...} dicts, one per micro-batch (or pack): the sequence\n"
      "    lengths it held (list, numpy or torch integers) and its seconds.\n"
      "The model, seconds = per_micro_batch + sum over sequences of (per_token * L\n"
      "+ per_token_squared * L^2 + per_sequence), is fitted by non-negative least\n"
      "squares on relative errors, leaving out outliers (warm-up steps,\n"
      "stragglers): records whose relative error is beyond `outlier_threshold`\n"
      "robust standard deviations and beyond `min_outlier_error`, at most\n"
      "`max_outlier_fraction` of them. The result's `fit` reports the errors.\n"
      "alignment > 1 also fits per_unaligned_token_squared, the extra L^2 seconds of\n"
      "a sequence whose length is not a multiple of it (8 for torch's CPU attention\n"
      "with AVX2, which takes a slower path on a ragged last block).",
      nb::sig("def calibrate(records, *, min_records: int = 8, outlier_threshold: float = 3.5, min_outlier_error: "
              "float = 0.05, max_outlier_fraction: float = 0.4, alignment: int = 1) -> Workload"));

  nb::class_<OnlineWorkload>(m, "OnlineWorkload",
                             "A calibrated workload kept current from timings reported while\n"
                             "training runs. report() is thread-safe and cheap; a background thread\n"
                             "refits on the latest `window` records. `workload` is the current model\n"
                             "(the prior until `min_records` records are in); pass the OnlineWorkload\n"
                             "itself wherever workload= is taken, and the call uses that snapshot.")
      .def(
          "__init__",
          [](OnlineWorkload* self, nb::handle prior, nb::handle window, nb::handle min_records, nb::handle alignment) {
            OnlineOptions options;
            options.window = int_argument(window, "window");
            options.min_records = int_argument(min_records, "min_records");
            options.calibration.alignment = int_argument(alignment, "alignment");
            new (self) OnlineWorkload(workload_argument(prior), options);
          },
          "prior"_a.none() = "tokens", "window"_a.none() = 4096, "min_records"_a.none() = 16, "alignment"_a.none() = 1)
      .def(
          "report",
          [](OnlineWorkload& online, nb::handle lengths, nb::handle seconds) {
            const Int64Input values = int64_input(lengths, "lengths", true);
            online.report(as_span(values), seconds_value(seconds, "seconds"));
          },
          "lengths"_a.none(), "seconds"_a.none(), "One measured micro-batch: its sequence lengths and seconds.")
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
