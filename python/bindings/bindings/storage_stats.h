// StorageStats and CapacityStats as the dicts Python sees: {"samples": ..., "bytes": ...}.
#pragma once

#include <nanobind/nanobind.h>

#include "seqflow/storage.h"

namespace seqflow::bindings {

inline nanobind::dict stats_to_python(const StorageStats& stats) {
  nanobind::dict out;
  out["samples"] = stats.samples;
  out["bytes"] = stats.bytes;
  out["overhead_bytes"] = stats.overhead_bytes;
  return out;
}

// CapacityStats as a dict of its counts.
inline nanobind::dict capacity_stats_to_python(const CapacityStats& stats) {
  nanobind::dict out;
  out["waiting_puts"] = stats.waiting_puts;
  out["puts_waited"] = stats.puts_waited;
  out["puts_refused"] = stats.puts_refused;
  out["full_answers"] = stats.full_answers;
  return out;
}

}  // namespace seqflow::bindings
