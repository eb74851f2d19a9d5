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
  // Every rank's share of a batch at once (shares[rank]; `served_rank`'s
  // counts as served): all or, out of memory, none.
  void put_batch(const std::string& partition_id, const std::string& task_name, int64_t batch_index,
                 std::vector<std::vector<int64_t>> shares, int64_t served_rank);
  // Forgets one rank's share of a batch, or (nullopt) the whole batch.
  void erase(const std::string& partition_id, const std::string& task_name, int64_t batch_index,
             std::optional<int64_t> dp_rank) noexcept;
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
  using Key = std::tuple<std::string, std::string, int64_t>;      // partition, task, batch
  std::map<Key, std::map<int64_t, Share>, std::less<>> batches_;  // found by std::tie too, copying no string
};

}  // namespace seqflow::samplers
