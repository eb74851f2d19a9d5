// TokenBudgetSampler: each rank's batch filled with whole groups up to
// max_tokens of total_lengths. The first caller of a batch takes the oldest
// complete groups while they fit the global budget (max_tokens * dp_size),
// splits them over the ranks like seqlen_balanced, and drops the newest
// groups until no rank is over max_tokens. Reserved like seqlen_balanced.
// The budget is in tokens; the split balances the workload (tokens unless
// another model is given).
//
// batch_size is an upper bound: at most batch_size * dp_size samples per
// global batch (pass a large value to be bound by tokens alone). The batch is
// complete, and served, once the next complete group would overflow either
// bound; until then "not enough is ready", as with the other samplers.
#include <algorithm>

#include "common/checked_math.h"
#include "core/samplers/global_batch_sampler.h"
#include "core/samplers/group_selection.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

class TokenBudgetSampler final : public samplers::GlobalBatchSampler {
 public:
  TokenBudgetSampler(int64_t max_tokens, int64_t n, int64_t dp_size, int64_t default_length, const Workload& workload)
      : GlobalBatchSampler(dp_size),
        max_tokens_(max_tokens),
        n_(n),
        default_length_(default_length),
        workload_(workload) {
    samplers::check_positive(max_tokens, "max_tokens");
    samplers::check_positive(n, "n_samples_per_prompt");
  }
  std::string name() const override { return "token_budget"; }

 protected:
  std::optional<samplers::RankSplit> plan(const SampleRequest& request) override {
    if (request.batch_size < n_) {
      throw_invalid("batch_size (" + std::to_string(request.batch_size) + ") must be >= n_samples_per_prompt (" +
                    std::to_string(n_) + "): it bounds the samples per rank");
    }
    const int64_t budget = checked_mul(max_tokens_, dp_size()).value_or(INT64_MAX);
    const int64_t sample_cap = checked_mul(request.batch_size, dp_size()).value_or(INT64_MAX);
    std::vector<std::vector<int64_t>> groups, lengths;
    int64_t tokens = 0, samples = 0;
    bool full = false;
    samplers::for_each_complete_group(request.ready, n_, request.info, [&](std::span<const int64_t> group) {
      std::vector<int64_t> member_lengths;
      int64_t group_tokens = 0;
      for (int64_t index : group) {
        member_lengths.push_back(samplers::sample_length(*request.info, index, default_length_, request.partition_id));
        group_tokens = checked_add(group_tokens, member_lengths.back()).value_or(INT64_MAX);
      }
      if (group_tokens > max_tokens_) {
        throw_invalid("the group of global index " + std::to_string(group.front()) + " has " +
                      std::to_string(group_tokens) + " tokens, more than max_tokens " + std::to_string(max_tokens_) +
                      ": no rank can take it");
      }
      if (tokens + group_tokens > budget || samples + n_ > sample_cap) {
        full = true;
        return false;
      }
      groups.emplace_back(group.begin(), group.end());
      lengths.push_back(std::move(member_lengths));
      tokens += group_tokens;
      samples += n_;
      return true;
    });
    if (!full || static_cast<int64_t>(groups.size()) < dp_size()) return std::nullopt;
    for (;;) {
      samplers::RankSplit split = samplers::split_groups(groups, lengths, dp_size(), samplers::SplitAlgorithm::kAuto,
                                                         samplers::split_workload(workload_, request));
      const int64_t heaviest = *std::max_element(split.tokens.begin(), split.tokens.end());
      if (heaviest <= max_tokens_ || static_cast<int64_t>(groups.size()) == dp_size()) {
        return split;  // with one group per rank every rank fits: no group exceeds max_tokens
      }
      groups.pop_back();
      lengths.pop_back();
    }
  }

 private:
  int64_t max_tokens_;
  int64_t n_;
  int64_t default_length_;
  Workload workload_;
};

}  // namespace

std::shared_ptr<Sampler> make_token_budget_sampler(int64_t max_tokens, int64_t n_samples_per_prompt, int64_t dp_size,
                                                   int64_t default_length, const Workload& workload) {
  return std::make_shared<TokenBudgetSampler>(max_tokens, n_samples_per_prompt, dp_size, default_length, workload);
}

}  // namespace seqflow
