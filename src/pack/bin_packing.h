// Packing samples into a given number of bins under a token cap, internal to
// the pack layer.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "seqflow/workload.h"

namespace seqflow::pack::detail {

// Splits items into exactly k bins (k >= 1) so that no bin holds more than
// `cap` tokens, with bin workloads as even as the balancing engine makes them.
// Every item must be at most `cap` tokens. Returns item -> bin, or nullopt
// when no split into k bins under the cap was found (more bins are needed).
// Bins may stay empty when there are fewer items than bins.
std::optional<std::vector<int64_t>> fit_into_bins(std::span<const int64_t> tokens, int64_t k, int64_t cap,
                                                  const Workload& workload);

struct Bins {
  int64_t count = 0;
  std::vector<int64_t> assignment;  // item -> bin
};

// Best-fit decreasing by tokens: each item, longest first, into the fullest
// bin it fits, opening a bin when none does; nullopt when that needs more
// than max_bins. It succeeds for every max_bins at or above its own count.
std::optional<Bins> best_fit_decreasing(std::span<const int64_t> tokens, int64_t cap, int64_t max_bins);

// The fewest bins, at least `at_least`, that fit_into_bins manages.
Bins fewest_bins(std::span<const int64_t> tokens, int64_t cap, const Workload& workload, int64_t at_least);

// Fits every list of items (one per rank) into the same number of bins: the
// fewest of bins, bins + increment, bins + 2 * increment, ... for which
// fit_into_bins succeeds on every list (a binary search when `bins` itself
// fails). Leaves the count in `bins`; returns item -> bin per list.
std::vector<std::vector<int64_t>> fit_all_into_bins(const std::vector<std::vector<int64_t>>& tokens, int64_t& bins,
                                                    int64_t increment, int64_t cap, const Workload& workload);

// ceil(total / cap) for total >= 0, cap > 0.
inline int64_t ceil_div(int64_t total, int64_t cap) { return total / cap + (total % cap != 0); }

}  // namespace seqflow::pack::detail
