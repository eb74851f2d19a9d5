// Shared by the block cache tests (block_cache_test.cc and
// block_cache_concurrency_test.cc).
#pragma once

#include <cstddef>

namespace seqflow::test {

// Sizes in the tests are in MiB.
inline constexpr size_t kMiB = size_t{1} << 20;

}  // namespace seqflow::test
