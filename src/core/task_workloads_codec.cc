#include "core/task_workloads_codec.h"

#include "common/json_text.h"
#include "seqflow/error.h"
#include "seqflow/limits.h"

namespace seqflow::core {
namespace {

Value integers(const std::vector<int64_t>& values) { return Value::Array(values.begin(), values.end()); }

OnlineWorkloadState decode_state(const Value& entry) {
  OnlineWorkloadState state;
  state.current = Workload::from_json(entry.at("workload").dump());
  state.reports = entry.at("reports").as_int();
  state.refitted = entry.at("refitted").as_int();
  const Value& lengths = entry.at("lengths");
  const Value& seconds = entry.at("seconds");
  if (!lengths.is_array() || !seconds.is_array() || lengths.size() != seconds.size()) {
    throw_invalid("'lengths' and 'seconds' must be lists of the same length (one entry per record)");
  }
  state.window.reserve(seconds.size());
  for (size_t i = 0; i < seconds.size(); ++i) {
    TimingRecord record{{}, seconds.at(i).as_double()};
    for (const Value& length : lengths.at(i).as_array()) record.lengths.push_back(length.as_int());
    state.window.push_back(std::move(record));
  }
  return state;
}

}  // namespace

Value encode_task_workloads(const std::map<std::string, OnlineWorkloadState>& states) {
  Value out = Value::object();
  for (const auto& [task_name, state] : states) {
    Value lengths = Value::array();
    Value seconds = Value::array();
    for (const TimingRecord& record : state.window) {
      lengths.push_back(integers(record.lengths));
      seconds.push_back(record.seconds);
    }
    out[task_name] = {{"workload", parse_json_text(state.current.to_json(), kMaxDecodeNesting)},
                      {"reports", state.reports},
                      {"refitted", state.refitted},
                      {"lengths", std::move(lengths)},
                      {"seconds", std::move(seconds)}};
  }
  return out;
}

std::map<std::string, OnlineWorkloadState> decode_task_workloads(const Value& encoded) {
  if (!encoded.is_object()) throw_invalid("task_workloads is not an object of tasks");
  std::map<std::string, OnlineWorkloadState> out;
  for (const auto& [task_name, entry] : encoded.as_object()) {
    try {
      out.emplace(task_name, decode_state(entry));
    } catch (const Error& error) {
      throw_invalid("task_workloads is corrupt: task '" + task_name + "': " + error.what());
    }
  }
  return out;
}

}  // namespace seqflow::core
