// Each task's measured workload model to and from a Value (stored as
// MessagePack in controller checkpoints):
//   {task: {"workload": Workload JSON, "reports": n, "refitted": n,
//           "lengths": [[...], ...], "seconds": [...]}}
// the window's records as two parallel lists, oldest first.
#pragma once

#include <map>
#include <string>

#include "seqflow/calibration.h"
#include "seqflow/value.h"

namespace seqflow::core {

Value encode_task_workloads(const std::map<std::string, OnlineWorkloadState>& states);

// Throws kInvalidArgument naming the task and the missing key, wrong type,
// bad workload or mismatched lists; the states themselves are checked when
// resumed (TaskWorkloads::resume).
std::map<std::string, OnlineWorkloadState> decode_task_workloads(const Value& encoded);

}  // namespace seqflow::core
