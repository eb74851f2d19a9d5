// SeqlenBalancedSampler: batch_size is per DP rank. The first caller of a
// batch takes batch_size * dp_size samples in whole groups (fewer: not
// enough yet) and splits the groups over the ranks by total_lengths (their
// workload: tokens unless another model is given).
// Unlike TransferQueue's it reserves the whole global batch (no sample can
// reach two ranks) and balances group counts that do not divide dp_size to
// within one group instead of failing an assertion. Without any per-sample
// metadata (SampleInfo::has_lengths) it splits in order, as TransferQueue
// does without a partition.
#include "common/checked_math.h"
#include "core/samplers/global_batch_sampler.h"
#include "core/samplers/group_selection.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

class SeqlenBalancedSampler final : public samplers::GlobalBatchSampler {
 public:
  SeqlenBalancedSampler(int64_t n, int64_t dp_size, const std::string& algorithm, int64_t default_length,
                        const Workload& workload)
      : GlobalBatchSampler(dp_size),
        n_(n),
        algorithm_(samplers::parse_split_algorithm(algorithm)),
        default_length_(default_length),
        workload_(workload) {
    samplers::check_positive(n, "n_samples_per_prompt");
  }
  std::string name() const override { return "seqlen_balanced"; }

 protected:
  std::optional<samplers::RankSplit> plan(const SampleRequest& request) override {
    const auto global = checked_mul(request.batch_size, dp_size());
    if (!global || *global % n_ != 0) {
      throw_invalid("batch_size * dp_size (" + std::to_string(request.batch_size) + " * " + std::to_string(dp_size()) +
                    ") must be a multiple of n_samples_per_prompt (" + std::to_string(n_) + ")");
    }
    const int64_t wanted = *global / n_;
    if (wanted < dp_size()) {
      throw_invalid("batch_size " + std::to_string(request.batch_size) + " gives " + std::to_string(wanted) +
                    " groups of n_samples_per_prompt " + std::to_string(n_) + ", fewer than dp_size " +
                    std::to_string(dp_size()) + ": some rank would get nothing");
    }
    std::vector<std::vector<int64_t>> groups;
    samplers::for_each_complete_group(request.ready, n_, request.info, [&](std::span<const int64_t> group) {
      groups.emplace_back(group.begin(), group.end());
      return static_cast<int64_t>(groups.size()) < wanted;
    });
    if (static_cast<int64_t>(groups.size()) < wanted) return std::nullopt;
    if (!request.info->has_lengths()) return samplers::split_groups_in_order(groups, dp_size());
    std::vector<std::vector<int64_t>> lengths;
    for (const auto& group : groups) {
      std::vector<int64_t>& member_lengths = lengths.emplace_back();
      for (int64_t index : group) {
        member_lengths.push_back(samplers::sample_length(*request.info, index, default_length_, request.partition_id));
      }
    }
    return samplers::split_groups(groups, lengths, dp_size(), algorithm_, samplers::split_workload(workload_, request));
  }

 private:
  int64_t n_;
  samplers::SplitAlgorithm algorithm_;
  int64_t default_length_;
  Workload workload_;
};

}  // namespace

std::shared_ptr<Sampler> make_seqlen_balanced_sampler(int64_t n_samples_per_prompt, int64_t dp_size,
                                                      std::string algorithm, int64_t default_length,
                                                      const Workload& workload) {
  return std::make_shared<SeqlenBalancedSampler>(n_samples_per_prompt, dp_size, algorithm, default_length, workload);
}

}  // namespace seqflow
