// RankAwareSampler: the first caller of a (dp_rank, batch_index) takes the
// oldest batch_size ready samples; every later caller with the same pair
// (the other TP/PP ranks of that DP replica) gets the same samples.
// Different dp_ranks get disjoint samples because taking consumes them.
#include "core/samplers/group_selection.h"
#include "core/samplers/reservation_book.h"
#include "seqflow/error.h"
#include "seqflow/sampler.h"

namespace seqflow {
namespace {

class RankAwareSampler final : public Sampler {
 public:
  std::string name() const override { return "rank_aware"; }
  bool prefix_stable() const override { return true; }

  std::optional<std::vector<int64_t>> reserved(const std::string& partition_id, const std::string& task_name,
                                               const SamplingConfig& sampling) override {
    return book_.find(partition_id, task_name, sampling.batch_index, sampling.dp_rank);
  }

  SampleResult sample(const SampleRequest& request) override {
    samplers::check_batch_size(request.batch_size);
    if (request.sampling.dp_rank < 0) {  // TransferQueue's wording
      throw_invalid("dp_rank " + std::to_string(request.sampling.dp_rank) + " must be greater than or equal to 0");
    }
    SampleResult result;
    if (auto answer = reserved(request.partition_id, request.task_name, request.sampling)) {
      result.sampled = std::move(*answer);  // consumed when it was reserved
      return result;
    }
    if (static_cast<int64_t>(request.ready.size()) < request.batch_size) return result;
    result.sampled.assign(request.ready.begin(), request.ready.begin() + request.batch_size);
    result.consumed = result.sampled;
    book_.put(request.partition_id, request.task_name, request.sampling.batch_index, request.sampling.dp_rank,
              result.sampled);
    result.reserved = true;
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
  samplers::ReservationBook book_;
};

}  // namespace

std::shared_ptr<Sampler> make_rank_aware_sampler() { return std::make_shared<RankAwareSampler>(); }

}  // namespace seqflow
