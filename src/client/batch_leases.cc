#include <span>

#include "seqflow/client.h"

namespace seqflow {

size_t end_leases(ControlPlane& control, const BatchMeta& meta, const std::string& task_name, bool release) {
  const std::span<const int64_t> indexes(meta.global_indexes);
  const std::span<const uint64_t> generations(meta.generations);
  size_t ended = 0;
  size_t start = 0;
  for (size_t run = 0; run < meta.partition_ids.run_count(); ++run) {
    const size_t end = meta.partition_ids.run_end(run);
    ended += control.end_leases(meta.partition_ids.run_name(run), task_name, indexes.subspan(start, end - start),
                                generations.empty() ? generations : generations.subspan(start, end - start), release,
                                meta.lease);
    start = end;
  }
  return ended;
}

}  // namespace seqflow
