#include "core/samplers/rank_split.h"

#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace seqflow::samplers {

SplitAlgorithm parse_split_algorithm(const std::string& name) {
  if (name == "auto") return SplitAlgorithm::kAuto;
  if (name == "kk") return SplitAlgorithm::kKK;
  throw_invalid("algorithm must be 'auto' or 'kk', got '" + name + "'");
}

std::string to_string(SplitAlgorithm algorithm) { return algorithm == SplitAlgorithm::kKK ? "kk" : "auto"; }

int64_t sample_length(const SampleInfo& info, int64_t global_index, int64_t default_length,
                      const std::string& partition_id) {
  if (auto length = info.length(global_index)) return *length;
  if (default_length >= 0) return default_length;
  throw_invalid("sample with global index " + std::to_string(global_index) + " of partition '" + partition_id +
                "' has no custom_meta total_lengths (set it, or give default_length >= 0)");
}

namespace {

void check_enough_groups(int64_t group_count, int64_t dp_size) {
  if (group_count < dp_size) {
    throw_invalid("cannot split " + std::to_string(group_count) + " groups over dp_size " + std::to_string(dp_size) +
                  " ranks");
  }
}

}  // namespace

RankSplit split_groups_in_order(const std::vector<std::vector<int64_t>>& groups, int64_t dp_size) {
  const auto group_count = static_cast<int64_t>(groups.size());
  check_enough_groups(group_count, dp_size);
  RankSplit split;
  split.ranks.resize(static_cast<size_t>(dp_size));
  split.tokens.assign(static_cast<size_t>(dp_size), 0);
  for (int64_t g = 0; g < group_count; ++g) {
    // Rank r takes groups [r * count / dp_size, (r + 1) * count / dp_size).
    const int64_t rank = ((g + 1) * dp_size - 1) / group_count;
    const auto& members = groups[static_cast<size_t>(g)];
    split.ranks[static_cast<size_t>(rank)].insert(split.ranks[static_cast<size_t>(rank)].end(), members.begin(),
                                                  members.end());
  }
  return split;
}

RankSplit split_groups(const std::vector<std::vector<int64_t>>& groups,
                       const std::vector<std::vector<int64_t>>& lengths, int64_t dp_size, SplitAlgorithm algorithm,
                       const Workload& workload) {
  const auto group_count = static_cast<int64_t>(groups.size());
  check_enough_groups(group_count, dp_size);
  // Group indexes per rank, ascending.
  std::vector<std::vector<int64_t>> parts;
  if (algorithm == SplitAlgorithm::kKK) {
    // As TransferQueue: KK over group sums, equal group counts when they divide.
    std::vector<int64_t> sums;
    for (const auto& member_lengths : lengths) {
      sums.push_back(workload.total(workload.costs(member_lengths, "total_lengths"), "total_lengths"));
    }
    parts = balance::get_seqlen_balanced_partitions(sums, dp_size, group_count % dp_size == 0);
  } else {
    std::vector<int64_t> weights, group_of;
    for (size_t g = 0; g < groups.size(); ++g) {
      for (int64_t length : lengths[g]) {
        weights.push_back(length);
        group_of.push_back(static_cast<int64_t>(g));
      }
    }
    balance::Options options;
    options.cardinality = balance::Cardinality::kBalanced;
    options.algorithm = balance::Algorithm::kAuto;
    options.workload = workload;
    options.groups = group_of;
    const balance::Partition partition = balance::partition(weights, dp_size, options);
    for (const auto& items : partition.parts) {
      std::vector<int64_t> part;
      for (int64_t item : items) {
        const int64_t g = group_of[static_cast<size_t>(item)];
        if (part.empty() || part.back() != g) part.push_back(g);
      }
      parts.push_back(std::move(part));
    }
  }
  RankSplit split;
  split.ranks.resize(static_cast<size_t>(dp_size));
  split.tokens.assign(static_cast<size_t>(dp_size), 0);
  for (size_t rank = 0; rank < parts.size(); ++rank) {
    for (int64_t g : parts[rank]) {
      const auto& members = groups[static_cast<size_t>(g)];
      split.ranks[rank].insert(split.ranks[rank].end(), members.begin(), members.end());
      for (int64_t length : lengths[static_cast<size_t>(g)]) split.tokens[rank] += length;
    }
  }
  return split;
}

const Workload& split_workload(const Workload& configured, const SampleRequest& request) {
  if (configured.kind() == Workload::Kind::kOnline && request.task_workload != nullptr) return *request.task_workload;
  return configured;
}

}  // namespace seqflow::samplers
