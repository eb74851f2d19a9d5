// report_timing and task_workload on the wire: timing records travel as three
// binaries (every record's lengths back to back, each record's count of
// sequences, each record's seconds), a task's model as Workload::to_json.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "seqflow/controller.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::wire {

MsgpackMapWriter timing_request(const std::string& task_name, std::span<const TimingRecord> records);
// The records of a report_timing request; the counts must add up to the
// lengths given and match the seconds, or the request is refused naming the key.
std::vector<TimingRecord> read_timing_records(const EncodedMap& header);

MsgpackMapWriter task_workload_reply(const std::optional<TaskWorkload>& model);
std::optional<TaskWorkload> read_task_workload(const EncodedMap& reply, const std::string& task_name);

}  // namespace seqflow::transport::wire
