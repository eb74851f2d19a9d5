// The tasks' measured workload models as Prometheus lines: coefficients,
// prediction error of the current fit, reports.
#pragma once

#include <string>
#include <vector>

#include "seqflow/controller.h"

namespace seqflow::server {

void render_task_workloads(const std::vector<TaskWorkload>& models, std::string& out);

}  // namespace seqflow::server
