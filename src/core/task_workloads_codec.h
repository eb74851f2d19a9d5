// Each task's measured workload model to and from JSON (stored as MessagePack
// in controller checkpoints):
//   {task: {"workload": Workload JSON, "reports": n, "refitted": n,
//           "lengths": [[...], ...], "seconds": [...]}}
// the window's records as two parallel lists, oldest first.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "seqflow/calibration.h"

namespace seqflow::core {

nlohmann::json encode_task_workloads(const std::map<std::string, OnlineWorkloadState>& states);

// Throws nlohmann::json exceptions on a missing key or wrong type, and
// kInvalidArgument naming the task for a bad workload or mismatched lists;
// the states themselves are checked when resumed (TaskWorkloads::resume).
std::map<std::string, OnlineWorkloadState> decode_task_workloads(const nlohmann::json& encoded);

}  // namespace seqflow::core
