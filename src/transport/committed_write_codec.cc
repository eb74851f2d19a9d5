#include "common/value_json.h"
#include "transport/field_versions_codec.h"

namespace seqflow::transport::wire {

Json encode_committed_write(const CommittedWrite& committed) {
  Json reply = Json::object();
  if (!committed.versions.empty()) {
    Json versions = Json::object();
    for (const auto& [field, per_sample] : committed.versions) versions[field] = binary_of(std::span(per_sample));
    reply["versions"] = std::move(versions);
  }
  if (!committed.newer_meta_positions.empty()) {
    reply["newer_meta_positions"] = binary_of(std::span(committed.newer_meta_positions));
    reply["newer_metas"] = encode_objects(committed.newer_metas);
  }
  return reply;
}

CommittedWrite decode_committed_write(const Json& reply, size_t samples, std::string_view what) {
  const Header header(reply, what, {"versions", "newer_meta_positions", "newer_metas"});
  CommittedWrite out;
  if (header.has("versions")) out.versions = field_versions_at(header, "versions", samples);
  if (!header.has("newer_meta_positions")) return out;
  out.newer_meta_positions = header.numbers<int64_t>("newer_meta_positions");
  out.newer_metas = header.objects("newer_metas");
  if (out.newer_metas.size() != out.newer_meta_positions.size()) {
    header.fail("newer_metas", "must hold one object per position in newer_meta_positions");
  }
  for (int64_t position : out.newer_meta_positions) {
    if (position < 0 || static_cast<size_t>(position) >= samples) {
      header.fail("newer_meta_positions", "holds " + std::to_string(position) + ", outside the " +
                                              std::to_string(samples) + " samples written");
    }
  }
  return out;
}

}  // namespace seqflow::transport::wire
