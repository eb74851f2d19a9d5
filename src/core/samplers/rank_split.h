// Splitting a global batch of whole groups over DP ranks so that every rank
// carries about the same workload (tokens unless the sampler was given
// another model).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "seqflow/sampler.h"
#include "seqflow/workload.h"

namespace seqflow::samplers {

enum class SplitAlgorithm {
  kAuto,  // seqflow::balance::partition: groups whole, group counts within one
  kKK,    // TransferQueue's exact Karmarkar-Karp over group sums
};
// "auto" or "kk"; throws kInvalidArgument naming the value.
SplitAlgorithm parse_split_algorithm(const std::string& name);
std::string to_string(SplitAlgorithm algorithm);

// A sample's total_lengths, or default_length when unset and >= 0; otherwise
// throws kInvalidArgument naming the sample.
int64_t sample_length(const SampleInfo& info, int64_t global_index, int64_t default_length,
                      const std::string& partition_id);

struct RankSplit {
  std::vector<std::vector<int64_t>> ranks;  // global indexes per rank
  std::vector<int64_t> tokens;              // total_lengths per rank
};

// What a sampler configured with `configured` balances for this request: the
// task's measured model when it was configured with Workload::online() and
// the controller has fitted one, else `configured` (online costs as tokens).
const Workload& split_workload(const Workload& configured, const SampleRequest& request);

// `groups` hold global indexes, `lengths` their total_lengths, member by
// member. Needs at least dp_size groups. Groups stay whole; within a rank
// samples keep their order in `groups`. Ranks are balanced by `workload`.
RankSplit split_groups(const std::vector<std::vector<int64_t>>& groups,
                       const std::vector<std::vector<int64_t>>& lengths, int64_t dp_size, SplitAlgorithm algorithm,
                       const Workload& workload);

// Without lengths: consecutive runs of groups, group counts within one of
// each other (TransferQueue's equal split when the counts divide). tokens
// are left 0. Needs at least dp_size groups.
RankSplit split_groups_in_order(const std::vector<std::vector<int64_t>>& groups, int64_t dp_size);

}  // namespace seqflow::samplers
