// The policy version ops of the controller protocol: set_policy_version,
// policy_version and policy_versions (control_protocol.h).
#include "seqflow/error.h"
#include "transport/control_protocol.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::control {

Frames encode_policy_version(int64_t version) {
  MsgpackMapWriter header;
  header.set("version").integer(version);
  return wire::header_message(header);
}

int64_t decode_policy_version(const Frames& message, std::string_view what) {
  return wire::read_header(message, 0, what, {"version"}).integer("version");
}

Frames encode_policy_versions_request(const PolicyVersionsRequest& request) {
  MsgpackMapWriter header;
  header.set("partition_id").string(request.partition_id);
  if (request.global_indexes) {
    header.set("global_indexes").numbers(std::span<const int64_t>(*request.global_indexes));
  }
  if (request.keys) header.set("keys").strings(*request.keys);
  return wire::header_message(header);
}

PolicyVersionsRequest decode_policy_versions_request(const Frames& request) {
  const EncodedMap header =
      wire::read_header(request, 0, wire::request_name(kPolicyVersions), {"partition_id", "global_indexes", "keys"});
  PolicyVersionsRequest out{header.text("partition_id"), std::nullopt, std::nullopt};
  if (header.has("global_indexes") == header.has("keys")) {
    header.fail("global_indexes", "or keys must name the samples, exactly one of them");
  }
  if (header.has("global_indexes")) out.global_indexes = header.numbers<int64_t>("global_indexes");
  if (header.has("keys")) out.keys = header.texts("keys");
  return out;
}

Frames encode_policy_versions_reply(const PolicyVersions& versions) {
  MsgpackMapWriter header;
  header.set("start").numbers(std::span<const int64_t>(versions.start));
  header.set("finish").numbers(std::span<const int64_t>(versions.finish));
  return wire::header_message(header);
}

PolicyVersions decode_policy_versions_reply(const Frames& reply, size_t samples) {
  const EncodedMap header = wire::read_header(reply, 0, wire::reply_name(kPolicyVersions), {"start", "finish"});
  PolicyVersions out{header.numbers<int64_t>("start"), header.numbers<int64_t>("finish")};
  if (out.start.size() != samples || out.finish.size() != samples) {
    throw_invalid(header.what() + " holds " + std::to_string(out.start.size()) + " starts and " +
                  std::to_string(out.finish.size()) + " finishes for " + std::to_string(samples) + " samples");
  }
  return out;
}

}  // namespace seqflow::transport::control
