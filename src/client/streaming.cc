#include "seqflow/streaming.h"

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "seqflow/error.h"

namespace seqflow::streaming {

WorkerShare::WorkerShare(int64_t worker, int64_t workers) : worker_(worker), workers_(workers) {
  if (workers < 1 || worker < 0 || worker >= workers) {
    throw_invalid("worker must be in [0, workers), got worker " + std::to_string(worker) + " of " +
                  std::to_string(workers));
  }
}

bool production_complete(const FiniteOptions& options, std::span<const bool> produced) {
  if (options.total_samples) {
    return std::count(produced.begin(), produced.end(), true) >= *options.total_samples;
  }
  return !produced.empty() && std::all_of(produced.begin(), produced.end(), [](bool p) { return p; });
}

int64_t left_to_consume(std::span<const int64_t> indexes, std::span<const bool> produced,
                        std::span<const int64_t> consumed_indexes, std::span<const bool> consumed) {
  if (indexes.size() != produced.size() || consumed_indexes.size() != consumed.size()) {
    throw_invalid("left_to_consume: one flag per index, got " + std::to_string(indexes.size()) + " indexes and " +
                  std::to_string(produced.size()) + " produced flags, " + std::to_string(consumed_indexes.size()) +
                  " consumed indexes and " + std::to_string(consumed.size()) + " consumed flags");
  }
  std::unordered_set<int64_t> taken;
  for (size_t i = 0; i < consumed.size(); ++i) {
    if (consumed[i]) taken.insert(consumed_indexes[i]);
  }
  std::unordered_set<int64_t> left;
  for (size_t i = 0; i < produced.size(); ++i) {
    if (produced[i] && !taken.contains(indexes[i])) left.insert(indexes[i]);
  }
  return static_cast<int64_t>(left.size());
}

LastFetch fetch_after_production(const FiniteOptions& options, int64_t left) {
  const bool ends = options.drop_last || left == 0;
  return {ends ? options.batch_size : std::min(options.batch_size, left), ends};
}

std::optional<std::string> stall_reason(std::span<const std::string> fields, std::span<const bool> has_field,
                                        std::optional<int64_t> left) {
  if (has_field.empty()) return std::nullopt;
  if (has_field.size() != fields.size()) {
    throw_invalid("stall_reason: " + std::to_string(fields.size()) + " fields but " + std::to_string(has_field.size()) +
                  " flags");
  }
  std::string missing;
  for (size_t f = 0; f < fields.size(); ++f) {
    if (!has_field[f]) missing += (missing.empty() ? "'" : ", '") + fields[f] + "'";
  }
  if (!missing.empty()) {
    return "no sample of the partition has field(s) " + missing + "; check the names against what the producers put";
  }
  if (left.value_or(0) > 0) {
    return "production is complete, but the sampler serves no batch of the " + std::to_string(*left) +
           " sample(s) left (with drop_last=True the stream ends without them)";
  }
  return std::nullopt;
}

bool StallWatch::empty_fetch(Clock::time_point now) {
  if (!waiting_since_) waiting_since_ = now;
  return !warned_ && now - *waiting_since_ >= after_;
}

}  // namespace seqflow::streaming
