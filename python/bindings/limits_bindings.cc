// seqflow/limits.h as module constants: Python checks and errors name the same
// numbers as the engine.
#include <nanobind/nanobind.h>

#include "bindings/submodules.h"
#include "seqflow/limits.h"
#include "seqflow/watch.h"

namespace nb = nanobind;

namespace seqflow::bindings {

void bind_limits(nb::module_ m) {
  m.attr("MAX_CUSTOM_META_DEPTH") = kMaxCustomMetaDepth;
  m.attr("MAX_DECODE_NESTING") = kMaxDecodeNesting;
  m.attr("MAX_NAME_BYTES") = kMaxNameBytes;
  m.attr("MAX_RANK") = kMaxRank;
  m.attr("MAX_GLOBAL_INDEX") = kMaxGlobalIndex;
  m.attr("WIRE_PROTOCOL_VERSION") = kWireProtocolVersion;
  m.attr("PLACEMENT_BLOCK") = kPlacementBlock;
  m.attr("MAX_WATCH_CHANGES") = kMaxWatchChanges;
  m.attr("MAX_WATCH_WAIT_MS") = kMaxWatchWait.count();
}

}  // namespace seqflow::bindings
