#include <algorithm>

#include "seqflow/partition_id_list.h"

namespace seqflow {

const std::string& PartitionIdList::operator[](size_t i) const {
  const auto run = std::upper_bound(ends_.begin(), ends_.end(), i) - ends_.begin();
  return names_[static_cast<size_t>(run)];
}

void PartitionIdList::append(size_t count, const std::string& name) {
  if (count == 0) return;
  if (!names_.empty() && names_.back() == name) {
    ends_.back() += count;
    return;
  }
  names_.push_back(name);
  ends_.push_back(size() + count);
}

std::vector<std::string> PartitionIdList::to_vector() const {
  std::vector<std::string> out;
  out.reserve(size());
  for (size_t r = 0; r < run_count(); ++r) out.resize(run_end(r), run_name(r));
  return out;
}

}  // namespace seqflow
