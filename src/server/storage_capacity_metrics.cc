#include "server/storage_capacity_metrics.h"

#include <tuple>
#include <utility>

#include "server/metrics.h"

namespace seqflow::server {

void append_capacity_metrics(const StorageUnit& storage, std::string& out) {
  const StorageOptions& options = storage.options();
  append_metric_family(out, "seqflow_storage_limit", "gauge",
                       "The unit's capacity limits (0: unlimited; bytes count values and their bookkeeping)");
  for (const auto& [limit, value] : {std::pair{"max_bytes", options.max_bytes},
                                     {"max_samples", options.max_samples},
                                     {"max_bytes_per_partition", options.max_bytes_per_partition},
                                     {"max_samples_per_partition", options.max_samples_per_partition}}) {
    append_metric_sample(out, "seqflow_storage_limit", std::string("limit=\"") + limit + "\"",
                         static_cast<double>(value));
  }
  append_metric_family(out, "seqflow_storage_watermark", "gauge",
                       "Fractions of each limit: puts stop fitting above the high one; a limit that filled admits "
                       "puts again at the low one");
  append_metric_sample(out, "seqflow_storage_watermark", "level=\"high\"", options.high_watermark);
  append_metric_sample(out, "seqflow_storage_watermark", "level=\"low\"",
                       options.low_watermark.value_or(options.high_watermark));
  append_metric_family(out, "seqflow_storage_wait_when_full", "gauge",
                       "1: a put that does not fit waits for room (when_full=wait); 0: it raises");
  append_metric_sample(out, "seqflow_storage_wait_when_full", "", options.when_full == WhenFull::kWait ? 1 : 0);

  const std::vector<StorageUnit::PartitionUsage> partitions = storage.partition_usage();
  using Member = uint64_t StorageUnit::PartitionUsage::*;
  for (const auto& [name, member, help] :
       {std::tuple<const char*, Member, const char*>{
            "seqflow_storage_partition_samples", &StorageUnit::PartitionUsage::samples,
            "Samples of the partition the unit holds (counted with a per-partition limit)"},
        {"seqflow_storage_partition_bytes", &StorageUnit::PartitionUsage::bytes,
         "Bytes (values and their bookkeeping) of the partition the unit holds"}}) {
    if (partitions.empty()) break;
    append_metric_family(out, name, "gauge", help);
    for (const auto& usage : partitions) {
      append_metric_sample(out, name, "partition=\"" + escape_label_value(usage.partition) + "\"",
                           static_cast<double>(usage.*member));
    }
  }

  const CapacityStats puts = storage.capacity_stats();
  append_metric_family(out, "seqflow_storage_waiting_puts", "gauge",
                       "Puts waiting for room now (a service's: those answered 'full' whose place in line it keeps)");
  append_metric_sample(out, "seqflow_storage_waiting_puts", "", static_cast<double>(puts.waiting_puts));
  append_metric_family(out, "seqflow_storage_puts_waited_total", "counter",
                       "Puts that found no room and took a place in line to wait (a service: each place it gave)");
  append_metric_sample(out, "seqflow_storage_puts_waited_total", "", static_cast<double>(puts.puts_waited));
  append_metric_family(
      out, "seqflow_storage_puts_refused_total", "counter",
      "Puts that failed 'storage full', at once or at their deadline (a service's waiting puts give up "
      "in their clients: not counted here)");
  append_metric_sample(out, "seqflow_storage_puts_refused_total", "", static_cast<double>(puts.puts_refused));
  append_metric_family(
      out, "seqflow_storage_full_answers_total", "counter",
      "'No room' answers to puts that wait: each check of a waiting put, each 'full' sent to a client");
  append_metric_sample(out, "seqflow_storage_full_answers_total", "", static_cast<double>(puts.full_answers));
}

}  // namespace seqflow::server
