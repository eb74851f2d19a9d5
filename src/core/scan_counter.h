// Test probes: how many samples a walk on this thread visited. Tests use
// them to check that a fetch never walks consumed history and that a replay
// pass costs the changed keys, not the stored ones.
#pragma once

#include <cstdint>

namespace seqflow::detail {

// Not-yet-consumed samples visited by fetches.
inline thread_local uint64_t fetch_scan_visits = 0;
// Samples and keyed changes visited by replay indexes catching up.
inline thread_local uint64_t replay_index_visits = 0;

}  // namespace seqflow::detail
