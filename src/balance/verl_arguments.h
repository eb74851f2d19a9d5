// The checks verl's partitioning functions share (verl_compat.cc).
#pragma once

#include <cstdint>

namespace seqflow::balance::detail {

// k_partitions (already >= 1) at most max(items, 2^20): parts beyond the
// items come out empty, as in verl, but a huge count is an error, not an
// allocation; with equal_size, a divisor of items.
void check_partition_count(int64_t items, int64_t k_partitions, bool equal_size);

}  // namespace seqflow::balance::detail
