// StorageStats as the dict Python sees: {"samples": ..., "bytes": ...}.
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

}  // namespace seqflow::bindings
