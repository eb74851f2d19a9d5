#include "common/stale_sample.h"

#include "seqflow/error.h"

namespace seqflow {
namespace {

std::string sample_named(const std::string& partition, int64_t global_index, uint64_t meta_generation) {
  return "global index " + std::to_string(global_index) + " of partition '" + partition + "' (generation " +
         (meta_generation == 0 ? std::string("not known") : std::to_string(meta_generation)) + " in the BatchMeta)";
}

constexpr const char* kAdvice = "; the BatchMeta is stale, fetch a new one";

}  // namespace

void throw_sample_gone(const std::string& partition, int64_t global_index, uint64_t meta_generation) {
  throw Error(ErrorCode::kStaleSample,
              sample_named(partition, global_index, meta_generation) + " no longer exists (cleared)" + kAdvice);
}

void throw_sample_without_data(const std::string& partition, int64_t global_index, uint64_t meta_generation,
                               const std::string& field) {
  throw Error(ErrorCode::kStaleSample, sample_named(partition, global_index, meta_generation) +
                                           " has no data in storage (requested field \"" + field +
                                           "\"): it was cleared (or nothing was put to it yet)" + kAdvice);
}

void throw_sample_reused(const std::string& partition, int64_t global_index, uint64_t meta_generation,
                         uint64_t current_generation) {
  throw Error(ErrorCode::kStaleSample, sample_named(partition, global_index, meta_generation) +
                                           " no longer exists: the index was cleared and now holds generation " +
                                           std::to_string(current_generation) + kAdvice);
}

void throw_sample_foreign(const std::string& partition, int64_t global_index, uint64_t meta_generation,
                          const std::string& owner) {
  throw Error(ErrorCode::kStaleSample, sample_named(partition, global_index, meta_generation) +
                                           " is not in that partition: the index holds a sample of partition '" +
                                           owner + "'" + kAdvice);
}

}  // namespace seqflow
