// The controller's ops of task timings: reports and the fitted models.
#include "transport/control_protocol.h"

#include "transport/timing_codec.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::control {

using wire::header_message;
using wire::reply_name;
using wire::request_name;

Frames encode_report_timing_request(const std::string& task_name, std::span<const TimingRecord> records) {
  return header_message(wire::timing_request(task_name, records));
}

ReportTimingRequest decode_report_timing_request(const Frames& request) {
  const EncodedMap header =
      wire::read_header(request, 0, request_name(kReportTiming), {"task_name", "lengths", "counts", "seconds"});
  return {header.text("task_name"), wire::read_timing_records(header)};
}

Frames encode_task_workload_request(const std::string& task_name) {
  MsgpackMapWriter header;
  header.set("task_name").string(task_name);
  return header_message(header);
}

std::string decode_task_workload_request(const Frames& request) {
  return wire::read_header(request, 0, request_name(kTaskWorkload), {"task_name"}).text("task_name");
}

Frames encode_task_workload_reply(const std::optional<TaskWorkload>& model) {
  return header_message(wire::task_workload_reply(model));
}

std::optional<TaskWorkload> decode_task_workload_reply(const Frames& reply, const std::string& task_name) {
  return wire::read_task_workload(
      wire::read_header(reply, 0, reply_name(kTaskWorkload), {"found", "workload", "reports", "fitted"}), task_name);
}

}  // namespace seqflow::transport::control
