// Whole prompt groups out of the ready list, for the group-aware samplers.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "seqflow/sampler.h"

namespace seqflow::samplers {

// Walks `ready` oldest first and gathers members by SampleInfo::group_key;
// hands each group to `take` as soon as n of its members are ready, so the
// oldest complete groups come first. Stops when `take` returns false. A key
// with more than n ready members yields one group per n of them.
void for_each_complete_group(std::span<const int64_t> ready, int64_t n, const SampleInfo* info,
                             const std::function<bool(std::span<const int64_t>)>& take);

// Throws kInvalidArgument unless value >= 1 ("<parameter> must be positive,
// got <value>", TransferQueue's wording).
void check_positive(int64_t value, const char* parameter);
// Throws kInvalidArgument naming the value when batch_size < 0.
void check_batch_size(int64_t batch_size);

}  // namespace seqflow::samplers
