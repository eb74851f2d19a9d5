// SequentialSampler: the oldest batch_size ready samples, or nothing.
#include "core/samplers/group_selection.h"
#include "seqflow/sampler.h"

namespace seqflow {
namespace {

class SequentialSampler final : public Sampler {
 public:
  std::string name() const override { return "sequential"; }
  bool prefix_stable() const override { return true; }

  SampleResult sample(const SampleRequest& request) override {
    samplers::check_batch_size(request.batch_size);
    SampleResult result;
    if (static_cast<int64_t>(request.ready.size()) < request.batch_size) return result;
    result.sampled.assign(request.ready.begin(), request.ready.begin() + request.batch_size);
    result.consumed = result.sampled;
    return result;
  }
};

}  // namespace

std::shared_ptr<Sampler> make_sequential_sampler() { return std::make_shared<SequentialSampler>(); }

}  // namespace seqflow
