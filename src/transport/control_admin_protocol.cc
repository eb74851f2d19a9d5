// The controller's ops that only the cluster's own parts send: storage
// units registering, checkpoints saved and loaded.
#include "transport/control_protocol.h"

#include <bit>

#include "seqflow/error.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::control {
namespace {

using wire::header_message;
using wire::reply_name;
using wire::request_name;

void write_unsigned_integers(MsgpackWriter& out, const std::vector<uint64_t>& values) {
  out.array(values.size());
  for (const uint64_t value : values) out.unsigned_integer(value);
}

std::vector<uint64_t> unsigned_integers(const EncodedMap& header, std::string_view key) {
  const std::vector<std::string_view> items = header.elements(key, "must be an array of unsigned integers");
  std::vector<uint64_t> out;
  out.reserve(items.size());
  for (const std::string_view item : items) {
    const MsgpackReader::Token token = MsgpackReader(item, kMaxDecodeNesting).next(header.depth() + 2);
    if (token.kind != MsgpackReader::Kind::kUnsigned) header.fail(key, "must be an array of unsigned integers");
    out.push_back(token.number);
  }
  return out;
}

// A signed wire integer holding an unsigned id.
std::optional<uint64_t> bit_cast_id(const EncodedMap& header, std::string_view key) {
  if (!header.has(key)) return std::nullopt;
  return std::bit_cast<uint64_t>(header.integer(key));
}

}  // namespace

Frames encode_path_request(const std::string& path) {
  MsgpackMapWriter header;
  header.set("path").string(path);
  return header_message(header);
}

std::string decode_path_request(const Frames& request, std::string_view op) {
  return wire::read_header(request, 0, request_name(op), {"path"}).text("path");
}

Frames encode_save_checkpoint_request(const SaveCheckpointRequest& request) {
  MsgpackMapWriter header;
  header.set("controller").string(request.controller);
  header.set("storage").string(request.storage);
  return header_message(header);
}

SaveCheckpointRequest decode_save_checkpoint_request(const Frames& request) {
  const EncodedMap header = wire::read_header(request, 0, request_name(kSaveCheckpoint), {"controller", "storage"});
  return {header.text("controller"), header.text("storage")};
}

Frames encode_fingerprints_reply(const std::vector<uint64_t>& fingerprints) {
  MsgpackMapWriter header;
  write_unsigned_integers(header.set("fingerprints"), fingerprints);
  return header_message(header);
}

std::vector<uint64_t> decode_fingerprints_reply(const Frames& reply, std::string_view op) {
  return unsigned_integers(wire::read_header(reply, 0, reply_name(op), {"fingerprints"}), "fingerprints");
}

Frames encode_load_storage_request(const LoadStorageRequest& request) {
  MsgpackMapWriter header;
  header.set("path").string(request.path);
  write_unsigned_integers(header.set("fingerprints"), request.fingerprints);
  if (request.check_only) header.set("check_only").boolean(true);
  return header_message(header);
}

LoadStorageRequest decode_load_storage_request(const Frames& request, size_t storage_units) {
  const EncodedMap header =
      wire::read_header(request, 0, request_name(kLoadStorage), {"path", "fingerprints", "check_only"});
  LoadStorageRequest out{header.text("path"), {}, header.has("check_only") && header.boolean("check_only")};
  if (header.has("fingerprints")) out.fingerprints = unsigned_integers(header, "fingerprints");
  if (!out.fingerprints.empty() && out.fingerprints.size() != storage_units) {
    header.fail("fingerprints", "must hold one fingerprint per storage unit (" + std::to_string(storage_units) + ")");
  }
  return out;
}

Frames encode_register_storage_request(const RegisterStorageRequest& request) {
  MsgpackMapWriter header;
  header.set("endpoint").string(request.endpoint);
  header.set("admin_token").string(request.admin_token);
  if (request.instance) header.set("instance").integer(std::bit_cast<int64_t>(*request.instance));
  if (request.incarnation) header.set("incarnation").integer(std::bit_cast<int64_t>(*request.incarnation));
  if (request.protocol) header.set("protocol").integer(*request.protocol);
  return header_message(header);
}

RegisterStorageRequest decode_register_storage_request(const Frames& request) {
  const EncodedMap header = wire::read_header(request, 0, request_name(kRegisterStorage),
                                              {"endpoint", "instance", "incarnation", "admin_token", "protocol"});
  RegisterStorageRequest out{
      header.text("endpoint"), bit_cast_id(header, "instance"), header.text("admin_token"),
      bit_cast_id(header, "incarnation"),
      header.has("protocol") ? std::optional<int64_t>(header.integer("protocol")) : std::nullopt};
  if (out.endpoint.empty()) header.fail("endpoint", "is empty");
  return out;
}

Frames encode_storage_units_reply(const StorageUnitsReply& reply) {
  MsgpackMapWriter header;
  header.set("units").strings(reply.units);
  header.set("expected").integer(reply.expected);
  if (reply.incarnation) header.set("incarnation").integer(std::bit_cast<int64_t>(*reply.incarnation));
  return header_message(header);
}

StorageUnitsReply decode_storage_units_reply(const Frames& reply, std::string_view op) {
  const EncodedMap header = wire::read_header(reply, 0, reply_name(op), {"units", "expected", "incarnation"});
  StorageUnitsReply out{header.texts("units"), header.integer("expected"), std::nullopt};
  // Only a registration's reply names the controller's incarnation.
  if (op == kRegisterStorage) out.incarnation = std::bit_cast<uint64_t>(header.integer("incarnation"));
  return out;
}

Frames encode_hello(int64_t protocol) {
  MsgpackMapWriter header;
  header.set("protocol").integer(protocol);
  return header_message(header);
}

int64_t decode_hello(const Frames& message, std::string_view what) {
  return wire::read_header(message, 0, what, {"protocol"}).integer("protocol");
}

std::string protocol_mismatch(const std::string& here, const std::string& peer, std::optional<int64_t> version) {
  const std::string speaks = "wire protocol " + std::to_string(kProtocolVersion);
  return here + " speaks seqflow's " + speaks + "; " + peer +
         (version ? " speaks wire protocol " + std::to_string(*version)
                  : " predates wire protocol versions (an older seqflow)") +
         ": run one seqflow version on every host";
}

}  // namespace seqflow::transport::control
