// Raising a micro-batch plan's count without breaking its cap.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace seqflow::pack::detail {

// `count` non-empty parts from `parts` (count at most their items): empty
// parts dropped, then the costliest part of two or more items (the first on
// ties) split in two by verl's Karmarkar-Karp on `costs`, until there are
// `count`. Splitting never adds tokens to a part, so a cap that held still holds.
std::vector<std::vector<int64_t>> halve_to_count(std::vector<std::vector<int64_t>> parts, int64_t count,
                                                 std::span<const int64_t> costs);

}  // namespace seqflow::pack::detail
