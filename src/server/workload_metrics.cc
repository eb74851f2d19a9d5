#include "server/workload_metrics.h"

#include <utility>

#include "server/metrics.h"

namespace seqflow::server {
namespace {

std::string task_label(const TaskWorkload& model) { return "task=\"" + escape_label_value(model.task_name) + "\""; }

}  // namespace

void render_task_workloads(const std::vector<TaskWorkload>& models, std::string& out) {
  if (models.empty()) return;
  append_metric_family(out, "seqflow_task_workload_reports_total", "counter",
                       "Micro-batch timings the task's ranks reported");
  for (const auto& model : models) {
    append_metric_sample(out, "seqflow_task_workload_reports_total", task_label(model),
                         static_cast<double>(model.reports));
  }
  append_metric_family(
      out, "seqflow_task_workload_seconds", "gauge",
      "Coefficients of the task's fitted workload model: seconds per token, per token squared, per sequence "
      "and per micro-batch, and per token squared of a length that is not a multiple of the alignment when "
      "the controller fits one (tasks without a fit yet are absent)");
  for (const auto& model : models) {
    if (!model.fitted) continue;
    const SecondsCoefficients& c = model.workload.coefficients();
    for (const auto& [term, value] : {std::pair{"per_token", c.per_token},
                                      {"per_token_squared", c.per_token_squared},
                                      {"per_sequence", c.per_sequence},
                                      {"per_micro_batch", c.per_micro_batch}}) {
      append_metric_sample(out, "seqflow_task_workload_seconds", task_label(model) + ",term=\"" + term + "\"", value);
    }
    if (c.alignment > 1) {
      append_metric_sample(out, "seqflow_task_workload_seconds",
                           task_label(model) + ",term=\"per_unaligned_token_squared\"", c.per_unaligned_token_squared);
    }
  }
  append_metric_family(out, "seqflow_task_workload_alignment", "gauge",
                       "The alignment of the task's fit: its sequence lengths that are not a multiple of it cost "
                       "per_unaligned_token_squared more (1: no such term)");
  for (const auto& model : models) {
    if (model.fitted) {
      append_metric_sample(out, "seqflow_task_workload_alignment", task_label(model),
                           static_cast<double>(model.workload.coefficients().alignment));
    }
  }
  append_metric_family(
      out, "seqflow_task_workload_prediction_error", "gauge",
      "Relative error |predicted - measured| / measured of the task's current fit on the timings it was fitted "
      "on (outliers left out)");
  for (const auto& model : models) {
    if (!model.fitted) continue;
    const FitReport& fit = model.workload.fit();
    for (const auto& [quantile, value] :
         {std::pair{"0.5", fit.median_error}, {"0.9", fit.p90_error}, {"1", fit.max_error}}) {
      append_metric_sample(out, "seqflow_task_workload_prediction_error",
                           task_label(model) + ",quantile=\"" + quantile + "\"", value);
    }
  }
  append_metric_family(out, "seqflow_task_workload_outliers", "gauge",
                       "Timings the task's current fit left out as outliers");
  for (const auto& model : models) {
    if (model.fitted) {
      append_metric_sample(out, "seqflow_task_workload_outliers", task_label(model),
                           static_cast<double>(model.workload.fit().outliers));
    }
  }
}

}  // namespace seqflow::server
