// The rules of one data-parallel rank's stream of batches, for any client
// (seqflow.StreamingDataset follows them). The rank fetches batch indexes
// through its sampler, polling; what it fetches next and when it ends:
//
// - streaming mode never ends: when nothing is ready the rank sleeps and asks again.
// - finite mode ends once production is complete (production_complete) and
//   the task consumed every produced sample. Once production is complete, a
//   rank whose full batch cannot fill asks for what is left, so the short last
//   batch comes out (8 samples in batches of 3: 3, 3, 2); with drop_last it is
//   not fetched and the rank ends (fetch_after_production).
// - a rank that has waited long for a batch warns once (StallWatch) if, as
//   things stand, the batch cannot come (stall_reason).
// - with W workers, worker w handles batch indexes w, w+W, w+2W, ...
//   (WorkerShare): no two workers of a rank fetch the same batch.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace seqflow::streaming {

// Worker `worker` of `workers` (0 <= worker < workers, else kInvalidArgument).
class WorkerShare {
 public:
  WorkerShare(int64_t worker, int64_t workers);
  int64_t first() const { return worker_; }
  int64_t next(int64_t index) const { return index + workers_; }

 private:
  int64_t worker_;
  int64_t workers_;
};

struct FiniteOptions {
  int64_t batch_size = 1;
  // Production is complete once this many samples hold every requested
  // field; without it, once every sample of the partition does.
  std::optional<int64_t> total_samples;
  // Leave the short last batch unfetched (and unconsumed) and end.
  bool drop_last = false;
};

// `produced`: per sample of the partition, whether it holds every requested field.
bool production_complete(const FiniteOptions& options, std::span<const bool> produced);

// Produced samples the task has not consumed: indexes[i] with produced[i]
// that is no consumed_indexes[j] with consumed[j].
int64_t left_to_consume(std::span<const int64_t> indexes, std::span<const bool> produced,
                        std::span<const int64_t> consumed_indexes, std::span<const bool> consumed);

// The fetch to make once production is complete and `left` samples are left
// to consume: no sample becomes ready any more, so what is left is all the
// rank can still get.
struct LastFetch {
  int64_t batch_size;
  // An empty answer ends the rank. Else another rank took the samples
  // meanwhile, or the sampler serves no batch that short: ask again.
  bool ends_if_empty;
};
LastFetch fetch_after_production(const FiniteOptions& options, int64_t left);

// Why a batch waited for cannot come as things stand, or nothing (producers
// may simply be slow). `has_field[f]`: some sample holds fields[f], empty
// when the partition has no sample yet; `left`: samples left to consume once
// production is complete in finite mode, else nothing.
std::optional<std::string> stall_reason(std::span<const std::string> fields, std::span<const bool> has_field,
                                        std::optional<int64_t> left);

// When a stream that fetched nothing checks why: after waiting `after` for a
// batch, on each empty fetch until it has warned once.
class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StallWatch(Clock::duration after) : after_(after) {}
  // A fetch came back empty at `now`: true when the stream should check.
  bool empty_fetch(Clock::time_point now);
  void batch_came() { waiting_since_.reset(); }
  void warned() { warned_ = true; }

 private:
  Clock::duration after_;
  std::optional<Clock::time_point> waiting_since_;
  bool warned_ = false;
};

}  // namespace seqflow::streaming
