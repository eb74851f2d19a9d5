// Answers reserved for DP ranks: per (partition, task, batch_index), the
// samples each rank gets. Samplers that coordinate ranks record here what
// they handed out (or set aside) so every later caller gets the same answer.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

namespace seqflow::samplers {

class ReservationBook {
 public:
  std::optional<std::vector<int64_t>> find(const std::string& partition_id,
                                           const std::string& task_name, int64_t batch_index,
                                           int64_t dp_rank) const;
  bool has_batch(const std::string& partition_id, const std::string& task_name,
                 int64_t batch_index) const;
  void put(const std::string& partition_id, const std::string& task_name, int64_t batch_index,
           int64_t dp_rank, std::vector<int64_t> samples);
  // Everything of a partition, or of one task of it.
  void clear(const std::string& partition_id, const std::string* task_name);

  nlohmann::json state() const;
  // All or nothing: throws kInvalidArgument on a malformed state, unchanged.
  void restore(const nlohmann::json& state);

 private:
  using Key = std::tuple<std::string, std::string, int64_t>;  // partition, task, batch
  std::map<Key, std::map<int64_t, std::vector<int64_t>>> batches_;
};

}  // namespace seqflow::samplers
