// Base of the samplers that compute one global batch for all DP ranks at
// once (seqlen_balanced, token_budget). The first caller of a
// (partition, task, batch_index) computes it, and the WHOLE batch is marked
// consumed then, so no sample can reach two ranks, whatever order the ranks
// ask in. Every rank's share is reserved; later callers get theirs from it.
// Shares not served yet are also left out of later global batches: callers
// that mark only each rank's own share consumed (TransferQueue's contract
// for samplers called directly) cannot hand them out twice either.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/samplers/rank_split.h"
#include "core/samplers/reservation_book.h"
#include "seqflow/sampler.h"

namespace seqflow::samplers {

class GlobalBatchSampler : public Sampler {
 public:
  explicit GlobalBatchSampler(int64_t dp_size);

  bool prefix_stable() const override { return true; }
  std::optional<std::vector<int64_t>> reserved(const std::string& partition_id, const std::string& task_name,
                                               const SamplingConfig& sampling) override;
  SampleResult sample(const SampleRequest& request) final;
  void cancel_reservation(const std::string& partition_id, const std::string& task_name,
                          const SamplingConfig& sampling) noexcept override;
  void clear(const std::string& partition_id, const std::string* task_name) override;
  Value state() const override { return book_.state(); }
  void restore(const Value& state) override { book_.restore(state); }

 protected:
  // The global batch split over ranks, or nullopt when too little is ready.
  virtual std::optional<RankSplit> plan(const SampleRequest& request) = 0;
  int64_t dp_size() const { return dp_size_; }

 private:
  void check_rank(int64_t dp_rank) const;

  int64_t dp_size_;
  ReservationBook book_;
};

}  // namespace seqflow::samplers
