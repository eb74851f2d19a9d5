#include "transport/wire_codec.h"

namespace seqflow::transport::wire {

void write_status(MsgpackWriter& out, const std::vector<std::pair<int64_t, bool>>& status) {
  std::vector<int64_t> indexes;
  std::vector<uint8_t> flags;
  indexes.reserve(status.size());
  flags.reserve(status.size());
  for (const auto& [index, flag] : status) {
    indexes.push_back(index);
    flags.push_back(flag ? 1 : 0);
  }
  MsgpackMapWriter map;
  map.set("indexes").numbers(std::span<const int64_t>(indexes));
  map.set("flags").numbers(std::span<const uint8_t>(flags));
  map.write(out);
}

std::vector<std::pair<int64_t, bool>> read_status(const EncodedMap& status) {
  const auto indexes = status.numbers<int64_t>("indexes");
  const auto flags = status.numbers<uint8_t>("flags");
  if (indexes.size() != flags.size()) status.fail("flags", "must hold one flag per index");
  std::vector<std::pair<int64_t, bool>> out;
  out.reserve(indexes.size());
  for (size_t i = 0; i < indexes.size(); ++i) out.emplace_back(indexes[i], flags[i] != 0);
  return out;
}

}  // namespace seqflow::transport::wire
