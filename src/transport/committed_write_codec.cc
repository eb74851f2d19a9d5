#include "transport/field_versions_codec.h"

namespace seqflow::transport::wire {

MsgpackMapWriter committed_write_header(const CommittedWrite& committed) {
  MsgpackMapWriter reply;
  if (!committed.versions.empty()) {
    MsgpackMapWriter versions;
    for (const auto& [field, per_sample] : committed.versions) versions.set(field).numbers(std::span(per_sample));
    versions.write(reply.set("versions"));
  }
  if (!committed.newer_meta_positions.empty()) {
    reply.set("newer_meta_positions").numbers(std::span(committed.newer_meta_positions));
    write_objects(reply.set("newer_metas"), committed.newer_metas);
  }
  return reply;
}

CommittedWrite read_committed_write(const EncodedMap& reply, size_t samples) {
  CommittedWrite out;
  if (reply.has("versions")) out.versions = field_versions_at(reply, "versions", samples);
  if (!reply.has("newer_meta_positions")) return out;
  out.newer_meta_positions = reply.numbers<int64_t>("newer_meta_positions");
  out.newer_metas = reply.objects("newer_metas");
  if (out.newer_metas.size() != out.newer_meta_positions.size()) {
    reply.fail("newer_metas", "must hold one object per position in newer_meta_positions");
  }
  for (int64_t position : out.newer_meta_positions) {
    if (position < 0 || static_cast<size_t>(position) >= samples) {
      reply.fail("newer_meta_positions",
                 "holds " + std::to_string(position) + ", outside the " + std::to_string(samples) + " samples written");
    }
  }
  return out;
}

}  // namespace seqflow::transport::wire
