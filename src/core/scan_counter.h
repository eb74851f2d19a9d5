// Test probe: how many not-yet-consumed samples fetches on this thread have
// visited. Tests use it to check that a fetch never walks consumed history.
#pragma once

#include <cstdint>

namespace seqflow::detail {

inline thread_local uint64_t fetch_scan_visits = 0;

}  // namespace seqflow::detail
