// Answers reserved for DP ranks: per (partition, task, batch_index), the
// samples each rank gets, and whether that rank was served yet. Samplers
// that coordinate ranks record here what they handed out (or set aside) so
// every later caller gets the same answer.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "seqflow/value.h"

namespace seqflow::samplers {

class ReservationBook {
 public:
  std::optional<std::vector<int64_t>> find(const std::string& partition_id, const std::string& task_name,
                                           int64_t batch_index, int64_t dp_rank) const;
  // find(), and the share counts as served from now on.
  std::optional<std::vector<int64_t>> take(const std::string& partition_id, const std::string& task_name,
                                           int64_t batch_index, int64_t dp_rank);
  void put(const std::string& partition_id, const std::string& task_name, int64_t batch_index, int64_t dp_rank,
           std::vector<int64_t> samples, bool served = true);
  // The samples of the task's shares not served yet.
  std::unordered_set<int64_t> unserved(const std::string& partition_id, const std::string& task_name) const;
  // Everything of a partition, or of one task of it.
  void clear(const std::string& partition_id, const std::string* task_name);

  Value state() const;
  // All or nothing: throws kInvalidArgument on a malformed state, unchanged.
  void restore(const Value& state);

 private:
  struct Share {
    std::vector<int64_t> samples;
    bool served = true;
  };
  using Key = std::tuple<std::string, std::string, int64_t>;  // partition, task, batch
  std::map<Key, std::map<int64_t, Share>> batches_;
};

}  // namespace seqflow::samplers
