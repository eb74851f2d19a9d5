#include "transport/field_versions_codec.h"

#include <cstring>

namespace seqflow::transport::wire {

using Kind = MsgpackReader::Kind;

void write_field_versions(MsgpackWriter& out, const FieldVersions& versions) {
  out.map(versions.size());
  for (const auto& [field, per_sample] : versions) {
    out.string(field);
    out.numbers(std::span<const uint64_t>(per_sample));
  }
}

FieldVersions field_versions_at(const EncodedMap& header, std::string_view key, size_t n) {
  FieldVersions out;
  for (const auto& [field, versions] : header.members(key, "must be a map of field to versions")) {
    const std::string where = "of field " + in_quotes(field);
    const MsgpackReader::Token token = MsgpackReader(versions, kMaxDecodeNesting).next(header.depth() + 2);
    if (token.kind != Kind::kBinary) header.fail(key, where + " must be a binary array");
    // Checked before anything is allocated: the sender's count is not trusted.
    if (token.bytes.size() != n * sizeof(uint64_t)) {
      header.fail(key, where + " holds " + std::to_string(token.bytes.size()) + " bytes; " + std::to_string(n) +
                           " samples need one u64 version each (" + std::to_string(n * sizeof(uint64_t)) + " bytes)");
    }
    std::vector<uint64_t> read(n);
    if (n != 0) std::memcpy(read.data(), token.bytes.data(), token.bytes.size());
    out.insert_or_assign(std::string(field), std::move(read));  // a repeated field: the last one wins
  }
  return out;
}

}  // namespace seqflow::transport::wire
