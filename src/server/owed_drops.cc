#include "server/owed_drops.h"

#include <algorithm>

#include "seqflow/error.h"

namespace seqflow::server {

void OwedDrops::add(const std::string& unit, std::span<const int64_t> indexes, std::span<const uint64_t> generations) {
  if (indexes.size() != generations.size()) {
    throw_invalid("owed drops: " + std::to_string(generations.size()) + " generations for " +
                  std::to_string(indexes.size()) + " global indexes");
  }
  std::map<int64_t, uint64_t>& debt = owed_[unit];
  for (size_t i = 0; i < indexes.size(); ++i) {
    uint64_t& highest = debt[indexes[i]];
    highest = std::max(highest, generations[i]);
  }
}

OwedDrops::Debt OwedDrops::take(const std::string& unit) {
  Debt out;
  const auto found = owed_.find(unit);
  if (found == owed_.end()) return out;
  out.indexes.reserve(found->second.size());
  out.generations.reserve(found->second.size());
  for (const auto& [index, generation] : found->second) {
    out.indexes.push_back(index);
    out.generations.push_back(generation);
  }
  owed_.erase(found);
  return out;
}

size_t OwedDrops::size() const {
  size_t total = 0;
  for (const auto& [unit, debt] : owed_) total += debt.size();
  return total;
}

}  // namespace seqflow::server
