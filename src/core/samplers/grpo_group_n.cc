// GRPOGroupNSampler: whole prompt groups of n only, oldest complete first.
// Groups come from SampleInfo::group_key (group_id, or runs of n within one
// put), never from index contiguity, so reused indexes cannot split a group.
// A caller that names its dp_rank gets the same answer for a repeated
// (dp_rank, batch_index), as from TransferQueue's sampler.
#include "core/samplers/group_selection.h"
#include "core/samplers/reservation_book.h"
#include "seqflow/error.h"
#include "seqflow/sampler.h"

namespace seqflow {
namespace {

class GRPOGroupNSampler final : public Sampler {
 public:
  explicit GRPOGroupNSampler(int64_t n) : n_(n) { samplers::check_positive(n, "n_samples_per_prompt"); }
  std::string name() const override { return "grpo_group_n"; }
  bool prefix_stable() const override { return true; }

  std::optional<std::vector<int64_t>> reserved(const std::string& partition_id, const std::string& task_name,
                                               const SamplingConfig& sampling) override {
    if (!sampling.dp_rank_given) return std::nullopt;
    return book_.find(partition_id, task_name, sampling.batch_index, sampling.dp_rank);
  }

  SampleResult sample(const SampleRequest& request) override {
    samplers::check_batch_size(request.batch_size);
    SampleResult result;
    if (auto answer = reserved(request.partition_id, request.task_name, request.sampling)) {
      result.sampled = std::move(*answer);  // consumed when it was first given
      return result;
    }
    if (request.batch_size % n_ != 0) {
      throw_invalid("batch_size (" + std::to_string(request.batch_size) +
                    ") must be a multiple of n_samples_per_prompt (" + std::to_string(n_) + ")");
    }
    const int64_t wanted = request.batch_size / n_;
    if (wanted == 0) return result;
    std::vector<int64_t> picked;
    int64_t groups = 0;
    samplers::for_each_complete_group(request.ready, n_, request.info, [&](std::span<const int64_t> group) {
      picked.insert(picked.end(), group.begin(), group.end());
      return ++groups < wanted;
    });
    if (groups < wanted) return result;
    result.sampled = std::move(picked);
    result.consumed = result.sampled;
    if (request.sampling.dp_rank_given) {
      book_.put(request.partition_id, request.task_name, request.sampling.batch_index, request.sampling.dp_rank,
                result.sampled);
      result.reserved = true;
    }
    return result;
  }

  void cancel_reservation(const std::string& partition_id, const std::string& task_name,
                          const SamplingConfig& sampling) noexcept override {
    book_.erase(partition_id, task_name, sampling.batch_index, sampling.dp_rank);
  }
  void clear(const std::string& partition_id, const std::string* task_name) override {
    book_.clear(partition_id, task_name);
  }
  Value state() const override { return book_.state(); }
  void restore(const Value& state) override { book_.restore(state); }

 private:
  int64_t n_;
  samplers::ReservationBook book_;
};

}  // namespace

std::shared_ptr<Sampler> make_grpo_group_n_sampler(int64_t n_samples_per_prompt) {
  return std::make_shared<GRPOGroupNSampler>(n_samples_per_prompt);
}

}  // namespace seqflow
