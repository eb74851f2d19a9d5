#include "core/task_workloads_codec.h"

#include "seqflow/error.h"

namespace seqflow::core {

using nlohmann::json;

json encode_task_workloads(const std::map<std::string, OnlineWorkloadState>& states) {
  json out = json::object();
  for (const auto& [task_name, state] : states) {
    json lengths = json::array();
    std::vector<double> seconds;
    seconds.reserve(state.window.size());
    for (const TimingRecord& record : state.window) {
      lengths.push_back(record.lengths);
      seconds.push_back(record.seconds);
    }
    out[task_name] = {{"workload", json::parse(state.current.to_json())},
                      {"reports", state.reports},
                      {"refitted", state.refitted},
                      {"lengths", std::move(lengths)},
                      {"seconds", std::move(seconds)}};
  }
  return out;
}

std::map<std::string, OnlineWorkloadState> decode_task_workloads(const json& encoded) {
  if (!encoded.is_object()) throw_invalid("task_workloads is not an object of tasks");
  std::map<std::string, OnlineWorkloadState> out;
  for (const auto& [task_name, entry] : encoded.items()) {
    const std::string context = "task '" + task_name + "': ";
    OnlineWorkloadState state;
    try {
      state.current = Workload::from_json(entry.at("workload").dump());
    } catch (const Error& error) {
      throw Error(error.code(), context + error.what());
    }
    state.reports = entry.at("reports").get<int64_t>();
    state.refitted = entry.at("refitted").get<int64_t>();
    const json& lengths = entry.at("lengths");
    const auto seconds = entry.at("seconds").get<std::vector<double>>();
    if (!lengths.is_array() || lengths.size() != seconds.size()) {
      throw_invalid(context + "'lengths' and 'seconds' must be lists of the same length (one entry per record)");
    }
    state.window.reserve(seconds.size());
    for (size_t i = 0; i < seconds.size(); ++i) {
      state.window.push_back(TimingRecord{lengths[i].get<std::vector<int64_t>>(), seconds[i]});
    }
    out.emplace(task_name, std::move(state));
  }
  return out;
}

}  // namespace seqflow::core
