#include "common/msgpack_map_writer.h"

#include <utility>

namespace seqflow {

MsgpackWriter& MsgpackMapWriter::set(std::string_view key) {
  const auto [member, added] = members_.try_emplace(std::string(key));
  if (!added) member->second = MsgpackWriter();
  return member->second;
}

void MsgpackMapWriter::write(MsgpackWriter& out) const {
  out.map(members_.size());
  for (const auto& [key, value] : members_) {
    out.string(key);
    out.encoded(value.bytes());
  }
}

std::string MsgpackMapWriter::bytes() const {
  size_t size = 5;
  for (const auto& [key, value] : members_) size += 5 + key.size() + value.bytes().size();
  MsgpackWriter out(size);
  write(out);
  return std::move(out).take();
}

}  // namespace seqflow
