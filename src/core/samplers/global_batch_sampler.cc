#include "core/samplers/global_batch_sampler.h"

#include <unordered_set>

#include "core/samplers/group_selection.h"
#include "seqflow/error.h"

namespace seqflow::samplers {

GlobalBatchSampler::GlobalBatchSampler(int64_t dp_size) : dp_size_(dp_size) { check_positive(dp_size, "dp_size"); }

void GlobalBatchSampler::check_rank(int64_t dp_rank) const {
  if (dp_rank < 0 || dp_rank >= dp_size_) {
    throw_invalid("dp_rank must be in [0, dp_size " + std::to_string(dp_size_) + "), got " + std::to_string(dp_rank));
  }
}

std::optional<std::vector<int64_t>> GlobalBatchSampler::reserved(const std::string& partition_id,
                                                                 const std::string& task_name,
                                                                 const SamplingConfig& sampling) {
  check_rank(sampling.dp_rank);
  return book_.take(partition_id, task_name, sampling.batch_index, sampling.dp_rank);
}

SampleResult GlobalBatchSampler::sample(const SampleRequest& request) {
  check_batch_size(request.batch_size);
  SampleResult result;
  if (auto answer = reserved(request.partition_id, request.task_name, request.sampling)) {
    result.sampled = std::move(*answer);
    return result;
  }
  if (request.info == nullptr) throw Error(ErrorCode::kInternal, "sampler called without SampleInfo");
  if (request.batch_size == 0) return result;
  const std::unordered_set<int64_t> unserved = book_.unserved(request.partition_id, request.task_name);
  std::vector<int64_t> available;
  SampleRequest fresh = request;
  if (!unserved.empty()) {
    for (int64_t index : request.ready) {
      if (unserved.count(index) == 0) available.push_back(index);
    }
    fresh.ready = available;
  }
  std::optional<RankSplit> split = plan(fresh);
  if (!split) return result;
  for (const auto& share : split->ranks) result.consumed.insert(result.consumed.end(), share.begin(), share.end());
  result.sampled = split->ranks[static_cast<size_t>(request.sampling.dp_rank)];
  // Every rank's share reserved at once, last: a sample() that fails reserves nothing.
  book_.put_batch(request.partition_id, request.task_name, request.sampling.batch_index, std::move(split->ranks),
                  request.sampling.dp_rank);
  result.reserved = true;
  return result;
}

void GlobalBatchSampler::cancel_reservation(const std::string& partition_id, const std::string& task_name,
                                            const SamplingConfig& sampling) noexcept {
  book_.erase(partition_id, task_name, sampling.batch_index, std::nullopt);
}

void GlobalBatchSampler::clear(const std::string& partition_id, const std::string* task_name) {
  book_.clear(partition_id, task_name);
}

}  // namespace seqflow::samplers
