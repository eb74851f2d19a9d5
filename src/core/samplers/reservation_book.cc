#include "core/samplers/reservation_book.h"

#include "seqflow/error.h"

namespace seqflow::samplers {

std::optional<std::vector<int64_t>> ReservationBook::find(const std::string& partition_id, const std::string& task_name,
                                                          int64_t batch_index, int64_t dp_rank) const {
  auto batch = batches_.find(Key{partition_id, task_name, batch_index});
  if (batch == batches_.end()) return std::nullopt;
  auto rank = batch->second.find(dp_rank);
  if (rank == batch->second.end()) return std::nullopt;
  return rank->second.samples;
}

std::optional<std::vector<int64_t>> ReservationBook::take(const std::string& partition_id, const std::string& task_name,
                                                          int64_t batch_index, int64_t dp_rank) {
  auto batch = batches_.find(Key{partition_id, task_name, batch_index});
  if (batch == batches_.end()) return std::nullopt;
  auto rank = batch->second.find(dp_rank);
  if (rank == batch->second.end()) return std::nullopt;
  rank->second.served = true;
  return rank->second.samples;
}

void ReservationBook::put_batch(const std::string& partition_id, const std::string& task_name, int64_t batch_index,
                                std::vector<std::vector<int64_t>> shares, int64_t served_rank) {
  std::map<int64_t, Share> batch;
  for (size_t rank = 0; rank < shares.size(); ++rank) {
    const auto dp_rank = static_cast<int64_t>(rank);
    batch.emplace(dp_rank, Share{std::move(shares[rank]), dp_rank == served_rank});
  }
  batches_[Key{partition_id, task_name, batch_index}] = std::move(batch);
}

void ReservationBook::erase(const std::string& partition_id, const std::string& task_name, int64_t batch_index,
                            std::optional<int64_t> dp_rank) noexcept {
  const auto batch = batches_.find(std::tie(partition_id, task_name, batch_index));
  if (batch == batches_.end()) return;
  if (dp_rank) batch->second.erase(*dp_rank);
  if (!dp_rank || batch->second.empty()) batches_.erase(batch);
}

void ReservationBook::put(const std::string& partition_id, const std::string& task_name, int64_t batch_index,
                          int64_t dp_rank, std::vector<int64_t> samples, bool served) {
  batches_[Key{partition_id, task_name, batch_index}][dp_rank] = Share{std::move(samples), served};
}

std::unordered_set<int64_t> ReservationBook::unserved(const std::string& partition_id,
                                                      const std::string& task_name) const {
  std::unordered_set<int64_t> samples;
  for (auto it = batches_.lower_bound(Key{partition_id, task_name, INT64_MIN});
       it != batches_.end() && std::get<0>(it->first) == partition_id && std::get<1>(it->first) == task_name; ++it) {
    for (const auto& [rank, share] : it->second) {
      if (!share.served) samples.insert(share.samples.begin(), share.samples.end());
    }
  }
  return samples;
}

void ReservationBook::clear(const std::string& partition_id, const std::string* task_name) {
  auto it = batches_.lower_bound(Key{partition_id, task_name ? *task_name : "", INT64_MIN});
  while (it != batches_.end() && std::get<0>(it->first) == partition_id &&
         (task_name == nullptr || std::get<1>(it->first) == *task_name)) {
    it = batches_.erase(it);
  }
}

Value ReservationBook::state() const {
  Value batches = Value::array();
  for (const auto& [key, ranks] : batches_) {
    Value per_rank = Value::array();
    for (const auto& [rank, share] : ranks) {
      per_rank.push_back({{"dp_rank", rank},
                          {"samples", Value::Array(share.samples.begin(), share.samples.end())},
                          {"served", share.served}});
    }
    batches.push_back({{"partition_id", std::get<0>(key)},
                       {"task_name", std::get<1>(key)},
                       {"batch_index", std::get<2>(key)},
                       {"ranks", std::move(per_rank)}});
  }
  return {{"reservations", std::move(batches)}};
}

void ReservationBook::restore(const Value& state) {
  decltype(batches_) restored;
  try {
    for (const Value& batch : state.at("reservations").as_array()) {
      auto& ranks = restored[Key{batch.at("partition_id").as_string(), batch.at("task_name").as_string(),
                                 batch.at("batch_index").as_int()}];
      for (const Value& rank : batch.at("ranks").as_array()) {
        std::vector<int64_t> samples;
        for (const Value& sample : rank.at("samples").as_array()) samples.push_back(sample.as_int());
        // Checkpoints written before "served" existed: every share counted as served.
        const Value* served = rank.find("served");
        ranks[rank.at("dp_rank").as_int()] = Share{std::move(samples), served == nullptr || served->as_bool()};
      }
    }
  } catch (const Error& error) {
    throw_invalid(std::string("reservations state is malformed: ") + error.what());
  }
  batches_ = std::move(restored);
}

}  // namespace seqflow::samplers
