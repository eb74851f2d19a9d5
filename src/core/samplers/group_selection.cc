#include "core/samplers/group_selection.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "seqflow/error.h"

namespace seqflow::samplers {

void check_positive(int64_t value, const char* parameter) {
  if (value < 1) throw_invalid(std::string(parameter) + " must be positive, got " + std::to_string(value));
}

void check_batch_size(int64_t batch_size) {
  if (batch_size < 0) throw_invalid("batch_size must be >= 0, got " + std::to_string(batch_size));
}

void for_each_complete_group(std::span<const int64_t> ready, int64_t n, const SampleInfo* info,
                             const std::function<bool(std::span<const int64_t>)>& take) {
  if (n == 1) {
    for (const int64_t& index : ready) {
      if (!take(std::span<const int64_t>(&index, 1))) return;
    }
    return;
  }
  if (info == nullptr) throw Error(ErrorCode::kInternal, "sampler called without SampleInfo");
  std::unordered_map<std::string, std::vector<int64_t>> pending;
  for (int64_t index : ready) {
    std::vector<int64_t>& members = pending[info->group_key(index, n)];
    members.push_back(index);
    if (static_cast<int64_t>(members.size()) == n) {
      const std::vector<int64_t> group = std::move(members);
      members.clear();
      if (!take(group)) return;
    }
  }
}

}  // namespace seqflow::samplers
