// GRPOGroupNSampler: whole prompt groups of n only, oldest complete first.
// Groups come from SampleInfo::group_key (group_id, or runs of n within one
// put), never from index contiguity, so reused indexes cannot split a group.
#include "core/samplers/group_selection.h"
#include "seqflow/error.h"
#include "seqflow/sampler.h"

namespace seqflow {
namespace {

class GRPOGroupNSampler final : public Sampler {
 public:
  explicit GRPOGroupNSampler(int64_t n) : n_(n) {
    samplers::check_positive(n, "n_samples_per_prompt");
  }
  std::string name() const override { return "grpo_group_n"; }
  bool prefix_stable() const override { return true; }

  SampleResult sample(const SampleRequest& request) override {
    samplers::check_batch_size(request.batch_size);
    if (request.batch_size % n_ != 0) {
      throw_invalid("batch_size (" + std::to_string(request.batch_size) +
                    ") must be a multiple of n_samples_per_prompt (" + std::to_string(n_) + ")");
    }
    const int64_t wanted = request.batch_size / n_;
    SampleResult result;
    if (wanted == 0) return result;
    std::vector<int64_t> picked;
    int64_t groups = 0;
    samplers::for_each_complete_group(request.ready, n_, request.info,
                                      [&](std::span<const int64_t> group) {
                                        picked.insert(picked.end(), group.begin(), group.end());
                                        return ++groups < wanted;
                                      });
    if (groups < wanted) return result;
    result.sampled = std::move(picked);
    result.consumed = result.sampled;
    return result;
  }

 private:
  int64_t n_;
};

}  // namespace

std::shared_ptr<Sampler> make_grpo_group_n_sampler(int64_t n_samples_per_prompt) {
  return std::make_shared<GRPOGroupNSampler>(n_samples_per_prompt);
}

}  // namespace seqflow
