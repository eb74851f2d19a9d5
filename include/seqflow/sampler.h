// Samplers turn "ready samples" into the batch one caller (one DP rank) gets.
// Same contract as TransferQueue's: sample(ready, batch_size, ...) returns the
// samples handed to this caller and the samples to mark consumed for the task.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "seqflow/value.h"
#include "seqflow/workload.h"

namespace seqflow {

// TransferQueue's sampling_config.
struct SamplingConfig {
  int64_t dp_rank = 0;
  int64_t batch_index = 0;
  // The caller named its dp_rank. GRPOGroupNSampler then answers a repeated
  // (dp_rank, batch_index) with the same samples, as TransferQueue's does
  // (the TP/PP ranks of one DP rank); otherwise every call takes new groups.
  bool dp_rank_given = false;
  // The caller's other sampling_config keys (a JSON object), handed to
  // Python samplers as keyword arguments as TransferQueue does; null when
  // there are none, so a plain fetch carries nothing.
  Value extra = nullptr;
};

// What a sampler may ask about a sample. Implemented by the controller.
class SampleInfo {
 public:
  virtual ~SampleInfo() = default;
  // custom_meta["total_lengths"], if set.
  virtual std::optional<int64_t> length(int64_t global_index) const = 0;
  // The sample's group for groups of n: custom_meta["group_id"] when set
  // (any JSON scalar; equal values are one group), otherwise the samples of
  // one put call, cut into runs of n in the order they were put. Never index
  // contiguity. Two samples are in one group iff their keys are equal.
  virtual std::string group_key(int64_t global_index, int64_t n) const = 0;
  virtual const Value& custom_meta(int64_t global_index) const = 0;
  // False when the caller has no per-sample metadata at all (TransferQueue's
  // samplers called without a partition): samplers that balance
  // total_lengths then split in order, equally, as TransferQueue does.
  virtual bool has_lengths() const { return true; }
};

struct SampleRequest {
  std::span<const int64_t> ready;  // ready, not consumed by the task; oldest first
  int64_t batch_size = 0;          // >= 0, as the caller asked (per DP rank for DP-aware samplers)
  std::string partition_id;
  std::string task_name;
  SamplingConfig sampling;
  const SampleInfo* info = nullptr;
  // The task's measured workload (Controller::report_timing), once fitted;
  // samplers configured with the "online" workload balance it.
  const Workload* task_workload = nullptr;
};

struct SampleResult {
  std::vector<int64_t> sampled;   // handed to this caller, in order
  std::vector<int64_t> consumed;  // marked consumed for the task (may include
                                  // samples reserved for other ranks)
  // sample() reserved this answer (and any other ranks' shares) for later
  // calls: reserved() serves it from now on, cancel_reservation() takes it back.
  bool reserved = false;
};

// Called with the controller's lock held: implementations need no locking of
// their own, must not call back into the controller, and must be fast.
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::string name() const = 0;
  // An empty `sampled` means "not enough ready yet": polling callers get an
  // empty batch, blocking callers wait for more data. A negative batch_size
  // is kInvalidArgument; batch_size 0 gives an empty answer.
  virtual SampleResult sample(const SampleRequest& request) = 0;
  // An answer already reserved for this caller: served even when too little is
  // ready now. Consumption was recorded when it was reserved.
  virtual std::optional<std::vector<int64_t>> reserved(const std::string& partition_id, const std::string& task_name,
                                                       const SamplingConfig& sampling) {
    (void)partition_id, (void)task_name, (void)sampling;
    return std::nullopt;
  }
  // Takes back what the last sample() for this caller reserved
  // (SampleResult::reserved): the controller could not consume its answer.
  virtual void cancel_reservation(const std::string& partition_id, const std::string& task_name,
                                  const SamplingConfig& sampling) noexcept {
    (void)partition_id, (void)task_name, (void)sampling;
  }
  // True when sample() on the oldest part of the ready list gives the answer
  // it would give on the whole list whenever that answer is not empty. The
  // controller then hands over a prefix and grows it only on an empty answer,
  // so a large backlog of ready samples costs a fetch nothing. False (the
  // default): the whole ready list every time.
  virtual bool prefix_stable() const { return false; }
  // Forget state of a partition (cleared), or of one task (consumption reset).
  virtual void clear(const std::string& partition_id, const std::string* task_name) {
    (void)partition_id, (void)task_name;
  }
  // Checkpoints.
  virtual Value state() const { return Value::object(); }
  virtual void restore(const Value& state) { (void)state; }
};

// Factories; each sampler lives in src/core/samplers/<name>.cc.
std::shared_ptr<Sampler> make_sequential_sampler();
std::shared_ptr<Sampler> make_grpo_group_n_sampler(int64_t n_samples_per_prompt);
std::shared_ptr<Sampler> make_rank_aware_sampler();
// batch_size is per DP rank. The first caller of a batch_index reserves the
// whole global batch (every rank's share) and marks it consumed, and later
// global batches leave out shares not yet served, so no sample reaches two
// ranks even when the caller marks only each rank's own share consumed.
// algorithm: "auto" (balanced group counts, best of several partitioners) or
// "kk" (exact TransferQueue behaviour).
// default_length < 0: a sample without total_lengths is an error.
// workload: what the split evens out (kk: over group sums of its costs).
std::shared_ptr<Sampler> make_seqlen_balanced_sampler(int64_t n_samples_per_prompt, int64_t dp_size,
                                                      std::string algorithm = "auto", int64_t default_length = -1,
                                                      const Workload& workload = Workload::tokens());
// Fills each rank's batch up to max_tokens (sum of total_lengths), whole
// groups, balanced over dp_size ranks. batch_size is an upper bound: at most
// batch_size * dp_size samples per global batch. A batch is served once the
// next complete group would overflow the token budget or that bound. The
// budget is in tokens; `workload` is what the split over ranks evens out.
std::shared_ptr<Sampler> make_token_budget_sampler(int64_t max_tokens, int64_t n_samples_per_prompt, int64_t dp_size,
                                                   int64_t default_length = -1,
                                                   const Workload& workload = Workload::tokens());
// By name, as in config files: "sequential", "grpo_group_n", "rank_aware",
// "seqlen_balanced", "token_budget", with their arguments in `args`
// ("workload": a spec such as "verl", or a model object as
// Workload::to_json writes it).
std::shared_ptr<Sampler> make_sampler(const std::string& name, const Value& args);

}  // namespace seqflow
