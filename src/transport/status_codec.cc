#include "transport/wire_codec.h"

namespace seqflow::transport::wire {

Json encode_status(const std::vector<std::pair<int64_t, bool>>& status) {
  std::vector<int64_t> indexes;
  std::vector<uint8_t> flags;
  indexes.reserve(status.size());
  flags.reserve(status.size());
  for (const auto& [index, flag] : status) {
    indexes.push_back(index);
    flags.push_back(flag ? 1 : 0);
  }
  return Json{{"indexes", binary_of(std::span<const int64_t>(indexes))},
              {"flags", binary_of(std::span<const uint8_t>(flags))}};
}

std::vector<std::pair<int64_t, bool>> decode_status(const Json& value, std::string_view what) {
  const Header header(value, what, {"indexes", "flags"});
  const auto indexes = header.numbers<int64_t>("indexes");
  const auto flags = header.numbers<uint8_t>("flags");
  if (indexes.size() != flags.size()) header.fail("flags", "must hold one flag per index");
  std::vector<std::pair<int64_t, bool>> out;
  out.reserve(indexes.size());
  for (size_t i = 0; i < indexes.size(); ++i) out.emplace_back(indexes[i], flags[i] != 0);
  return out;
}

}  // namespace seqflow::transport::wire
