#include "transport/timing_codec.h"

namespace seqflow::transport::wire {

MsgpackMapWriter timing_request(const std::string& task_name, std::span<const TimingRecord> records) {
  std::vector<int64_t> lengths;
  std::vector<int64_t> counts;
  std::vector<double> seconds;
  counts.reserve(records.size());
  seconds.reserve(records.size());
  for (const TimingRecord& record : records) {
    lengths.insert(lengths.end(), record.lengths.begin(), record.lengths.end());
    counts.push_back(static_cast<int64_t>(record.lengths.size()));
    seconds.push_back(record.seconds);
  }
  MsgpackMapWriter request;
  request.set("task_name").string(task_name);
  request.set("lengths").numbers(std::span<const int64_t>(lengths));
  request.set("counts").numbers(std::span<const int64_t>(counts));
  request.set("seconds").numbers(std::span<const double>(seconds));
  return request;
}

std::vector<TimingRecord> read_timing_records(const EncodedMap& header) {
  const auto lengths = header.numbers<int64_t>("lengths");
  const auto counts = header.numbers<int64_t>("counts");
  const auto seconds = header.numbers<double>("seconds");
  if (counts.size() != seconds.size()) header.fail("counts", "must hold one count per seconds value");
  std::vector<TimingRecord> records;
  records.reserve(counts.size());
  size_t next = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0 || static_cast<uint64_t>(counts[i]) > lengths.size() - next) {
      header.fail("counts", "add up to more lengths than the request holds");
    }
    records.push_back(TimingRecord{{lengths.begin() + next, lengths.begin() + next + counts[i]}, seconds[i]});
    next += counts[i];
  }
  if (next != lengths.size()) header.fail("counts", "add up to fewer lengths than the request holds");
  return records;
}

MsgpackMapWriter task_workload_reply(const std::optional<TaskWorkload>& model) {
  MsgpackMapWriter reply;
  reply.set("found").boolean(model.has_value());
  if (!model) return reply;
  reply.set("workload").string(model->workload.to_json());
  reply.set("reports").integer(model->reports);
  reply.set("fitted").boolean(model->fitted);
  return reply;
}

std::optional<TaskWorkload> read_task_workload(const EncodedMap& found, const std::string& task_name) {
  if (!found.boolean("found")) return std::nullopt;
  return TaskWorkload{task_name, Workload::from_json(found.text("workload")), found.integer("reports"),
                      found.boolean("fitted")};
}

}  // namespace seqflow::transport::wire
