#include "core/replay_balance.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace seqflow::core {
namespace {

// Each trajectory's length, from its tag.
std::vector<int64_t> lengths_of(const ReplayPass& pass, const std::string& tag_name) {
  std::vector<int64_t> lengths;
  lengths.reserve(pass.tags.size());
  for (size_t i = 0; i < pass.tags.size(); ++i) {
    const Value* found = pass.tags[i].find(tag_name);
    if (found == nullptr || found->type() != Value::Type::kInt || found->as_int() < 0) {
      throw_invalid("balance_length_tag '" + tag_name + "' of trajectory '" + pass.keys[i] +
                    "' must be a non-negative integer (its length), got " +
                    (found == nullptr ? std::string("no such tag") : found->dump()));
    }
    lengths.push_back(found->as_int());
  }
  return lengths;
}

int64_t sum_of(const std::vector<int64_t>& lengths, const std::vector<int64_t>& items) {
  int64_t sum = 0;
  for (int64_t item : items) sum += lengths[static_cast<size_t>(item)];
  return sum;
}

}  // namespace

Workload replay_balance_workload(const std::string& spec) {
  try {
    Workload workload = Workload::parse(spec);
    if (workload.kind() != Workload::Kind::kOnline) return workload;
  } catch (const Error& error) {
    throw_invalid("balance_workload '" + spec + "': " + error.what());
  }
  throw_invalid("balance_workload '" + spec +
                "' must be tokens, verl or quadratic(a,b): a replay pass has no measured timings");
}

void balance_selected(const ReplayOptions& options, ReplayPass& pass) {
  const int64_t ranks = options.balance_ranks;
  const size_t count = pass.keys.size();
  // Not a multiple of the ranks (a failed group short of trajectories):
  // served in arrival order, as the trainer would get it without balance
  // (verl pads such a batch with copies before it balances); refusing would
  // refuse the same oldest groups on every pass.
  if (count == 0 || count % static_cast<size_t>(ranks) != 0) return;
  const std::vector<int64_t> lengths = lengths_of(pass, options.balance_length_tag);
  const Workload workload = replay_balance_workload(options.balance_workload);
  std::vector<int64_t> costs;
  costs.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    try {
      costs.push_back(workload.cost(lengths[i]));
    } catch (const Error& error) {
      throw_invalid("balance_length_tag '" + options.balance_length_tag + "' of trajectory '" + pass.keys[i] +
                    "' = " + std::to_string(lengths[i]) + ": " + error.what());
    }
  }
  const std::vector<std::vector<int64_t>> parts = balance::get_seqlen_balanced_partitions(costs, ranks, true);
  std::vector<std::string> keys;
  std::vector<Value> tags;
  keys.reserve(count);
  tags.reserve(count);
  std::vector<int64_t> sizes, sums, arrival_sums;
  for (const std::vector<int64_t>& part : parts) {
    for (int64_t item : part) {
      keys.push_back(std::move(pass.keys[static_cast<size_t>(item)]));
      tags.push_back(std::move(pass.tags[static_cast<size_t>(item)]));
    }
    sizes.push_back(static_cast<int64_t>(part.size()));
    sums.push_back(sum_of(lengths, part));
  }
  const size_t chunk = count / static_cast<size_t>(ranks);
  for (size_t begin = 0; begin < count; begin += chunk) {
    int64_t sum = 0;
    for (size_t i = begin; i < begin + chunk; ++i) sum += lengths[i];
    arrival_sums.push_back(sum);
  }
  pass.keys = std::move(keys);
  pass.tags = std::move(tags);
  pass.rank_sizes = std::move(sizes);
  pass.rank_lengths = std::move(sums);
  pass.arrival_rank_lengths = std::move(arrival_sums);
}

}  // namespace seqflow::core
