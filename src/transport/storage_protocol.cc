#include "transport/storage_protocol.h"

#include <bit>
#include <cstring>
#include <iterator>

#include "seqflow/error.h"

namespace seqflow::transport::storage_protocol {
namespace {

using wire::header_message;

using wire::reply_name;
using wire::request_name;

// The sample keys of `samples` at `positions`, the start of most headers.
MsgpackMapWriter keys_header(const SampleKeys& samples, std::span<const size_t> positions) {
  MsgpackMapWriter header;
  wire::add_sample_keys(header, samples, positions);
  return header;
}

std::optional<std::string> optional_text(const EncodedMap& header, std::string_view key) {
  return header.has(key) ? std::optional(header.text(key)) : std::nullopt;
}

// An encoded value's copy.
std::optional<std::string> optional_entry(const EncodedMap& header, std::string_view key) {
  return header.has(key) ? std::optional(std::string(header.value(key))) : std::nullopt;
}

void add_ticket(MsgpackMapWriter& header, const StorageUnit::Ticket& ticket) {
  header.set("ticket").binary(std::as_bytes(std::span(ticket)));
}

StorageUnit::Ticket ticket_of(const EncodedMap& header) {
  const std::string_view bytes = header.binary("ticket");
  StorageUnit::Ticket ticket;
  if (bytes.size() != ticket.size()) {
    header.fail("ticket", "must be " + std::to_string(ticket.size()) + " bytes, got " + std::to_string(bytes.size()));
  }
  std::memcpy(ticket.data(), bytes.data(), ticket.size());
  return ticket;
}

std::optional<StorageUnit::Ticket> optional_ticket(const EncodedMap& header) {
  return header.has("ticket") ? std::optional(ticket_of(header)) : std::nullopt;
}

uint64_t count(const EncodedMap& header, std::string_view key) {
  const int64_t value = header.integer(key);
  if (value < 0) header.fail(key, "must not be negative");
  return static_cast<uint64_t>(value);
}

}  // namespace

Frames encode_empty_reply() { return wire::empty_message(); }

void decode_empty_reply(const Frames& reply, std::string_view op) { wire::read_empty_message(reply, reply_name(op)); }

Frames encode_put_request(const SampleKeys& samples, std::span<const size_t> positions, std::string_view columns,
                          Frames data, const std::optional<StorageUnit::Ticket>& ticket,
                          std::span<const uint64_t> segment_samples) {
  MsgpackMapWriter header = keys_header(samples, positions);
  header.set("columns").encoded(columns);
  if (!segment_samples.empty()) header.set("segment_samples").numbers(segment_samples);
  if (ticket) add_ticket(header, *ticket);
  Frames request = header_message(header);
  std::move(data.begin(), data.end(), std::back_inserter(request));
  return request;
}

Frames encode_local_put_request(const SampleKeys& samples, std::span<const size_t> positions, std::string_view columns,
                                std::string_view local_frames) {
  MsgpackMapWriter header = keys_header(samples, positions);
  header.set("columns").encoded(columns);
  header.set("local_frames").encoded(local_frames);
  return header_message(header);
}

PutRequest decode_put_request(const Frames& request) {
  const EncodedMap header =
      wire::read_header(request, 0, request_name(kPut),
                        {"indexes", "partitions", "partition_ends", "generations", "write_version", "columns",
                         "segment_samples", "local_frames", "ticket"});
  PutRequest put{wire::read_sample_keys(header),
                 std::string(header.value("columns")),
                 {},
                 optional_entry(header, "local_frames"),
                 optional_ticket(header)};
  if (header.has("segment_samples")) {
    put.segment_samples = header.numbers<uint64_t>("segment_samples");
    if (put.local_frames) header.fail("segment_samples", "must be absent with local_frames (one segment)");
  }
  return put;
}

Frames encode_put_reply(const PutReply& reply) {
  if (!reply.local_copy_refused && !reply.full) return encode_empty_reply();
  MsgpackMapWriter header;
  if (reply.local_copy_refused) header.set("local_copy_refused").string(*reply.local_copy_refused);
  if (reply.full) header.set("full").string(*reply.full);
  if (reply.ticket) add_ticket(header, *reply.ticket);
  return header_message(header);
}

PutReply decode_put_reply(const Frames& reply) {
  const EncodedMap header = wire::read_header(reply, 0, reply_name(kPut), {"local_copy_refused", "full", "ticket"});
  return {optional_text(header, "local_copy_refused"), optional_text(header, "full"), optional_ticket(header)};
}

Frames encode_room_request(const RoomRequest& request) {
  MsgpackMapWriter header;
  header.set("first_index").integer(request.put.first_index);
  header.set("first_generation").unsigned_integer(request.put.first_generation);
  header.set("write_version").unsigned_integer(request.put.write_version);
  header.set("samples").unsigned_integer(request.put.samples);
  add_ticket(header, request.ticket);
  if (request.leave) header.set("leave").boolean(true);
  return header_message(header);
}

RoomRequest decode_room_request(const Frames& request) {
  const EncodedMap header =
      wire::read_header(request, 0, request_name(kRoom),
                        {"first_index", "first_generation", "write_version", "samples", "ticket", "leave"});
  return {{header.integer("first_index"), header.unsigned_integer("first_generation"),
           header.unsigned_integer("write_version"), header.unsigned_integer("samples")},
          ticket_of(header),
          header.has("leave") && header.boolean("leave")};
}

Frames encode_room_reply(const StorageUnit::Room& room) {
  MsgpackMapWriter header;
  header.set("placed").boolean(room.placed);
  if (room.full) header.set("full").string(*room.full);
  if (room.not_placed) header.set("not_placed").string(*room.not_placed);
  return header_message(header);
}

StorageUnit::Room decode_room_reply(const Frames& reply) {
  const EncodedMap header = wire::read_header(reply, 0, reply_name(kRoom), {"placed", "full", "not_placed"});
  return {header.boolean("placed"), optional_text(header, "full"), optional_text(header, "not_placed")};
}

Frames encode_get_request(const SampleKeys& samples, std::span<const size_t> positions,
                          const std::vector<std::string>& fields, std::span<const uint8_t> local_copy) {
  MsgpackMapWriter header = keys_header(samples, positions);
  header.set("fields").strings(fields);
  if (!local_copy.empty()) header.set("local_copy").numbers(local_copy);
  return header_message(header);
}

GetRequest decode_get_request(const Frames& request) {
  const EncodedMap header = wire::read_header(
      request, 0, request_name(kGet),
      {"indexes", "partitions", "partition_ends", "generations", "read_versions", "fields", "local_copy"});
  GetRequest out{wire::read_sample_keys(header), header.texts("fields"), std::nullopt};
  if (header.has("local_copy") && header.token("local_copy").kind == MsgpackReader::Kind::kBinary) {
    const std::string_view id = header.binary("local_copy");
    out.local_copy = std::vector<uint8_t>(id.begin(), id.end());
  }
  return out;
}

zmq::message_t encode_get_reply_header(const GetReply& reply) {
  MsgpackMapWriter header;
  header.set("fields").encoded(reply.fields);
  if (reply.local_frames) header.set("local_frames").encoded(*reply.local_frames);
  // As int64: the wire's integers are signed.
  if (reply.lease) header.set("lease").integer(std::bit_cast<int64_t>(*reply.lease));
  return wire::header_frame(header);
}

GetReply decode_get_reply(const Frames& reply) {
  const EncodedMap header = wire::read_header(reply, 0, reply_name(kGet), {"fields", "local_frames", "lease"});
  GetReply out{std::string(header.value("fields")), optional_entry(header, "local_frames"), std::nullopt};
  if (header.has("lease")) out.lease = std::bit_cast<uint64_t>(header.integer("lease"));
  return out;
}

Frames encode_settle_request(const SampleKeys& samples, std::span<const size_t> positions,
                             const std::vector<std::string>& fields, std::optional<uint64_t> write_tag) {
  MsgpackMapWriter header = keys_header(samples, positions);
  header.set("fields").strings(fields);
  if (write_tag) header.set("write_tag").unsigned_integer(*write_tag);
  return header_message(header);
}

SettleRequest decode_settle_request(const Frames& request, std::string_view op) {
  const EncodedMap header = wire::read_header(
      request, 0, request_name(op),
      {"indexes", "partitions", "partition_ends", "generations", "write_version", "fields", "write_tag"});
  SettleRequest out{wire::read_sample_keys(header), header.texts("fields"), std::nullopt};
  if (header.has("write_tag") && header.token("write_tag").kind == MsgpackReader::Kind::kUnsigned) {
    out.write_tag = header.unsigned_integer("write_tag");
  }
  return out;
}

Frames encode_bare_request() { return wire::empty_message(); }

void decode_bare_request(const Frames& request, std::string_view op) {
  wire::read_empty_message(request, request_name(op));
}

Frames encode_local_copy_session_reply(const std::string& address) {
  MsgpackMapWriter header;
  header.set("address").string(address);
  return header_message(header);
}

std::string decode_local_copy_session_reply(const Frames& reply) {
  return wire::read_header(reply, 0, reply_name(kLocalCopySession), {"address"}).text("address");
}

Frames encode_release_request(uint64_t lease) {
  MsgpackMapWriter header;
  header.set("lease").integer(std::bit_cast<int64_t>(lease));
  return header_message(header);
}

uint64_t decode_release_request(const Frames& request) {
  return std::bit_cast<uint64_t>(wire::read_header(request, 0, request_name(kRelease), {"lease"}).integer("lease"));
}

Frames encode_release_reply(bool held) {
  MsgpackMapWriter header;
  header.set("held").boolean(held);
  return header_message(header);
}

bool decode_release_reply(const Frames& reply) {
  return wire::read_header(reply, 0, reply_name(kRelease), {"held"}).boolean("held");
}

Frames encode_clear_request(const ClearRequest& request) {
  MsgpackMapWriter header;
  header.set("indexes").numbers(std::span<const int64_t>(request.indexes));
  header.set("generations").numbers(std::span<const uint64_t>(request.generations));
  if (request.admin_token) header.set("admin_token").string(*request.admin_token);
  return header_message(header);
}

ClearRequest decode_clear_request(const Frames& request) {
  const EncodedMap header =
      wire::read_header(request, 0, request_name(kClear), {"indexes", "generations", "admin_token"});
  return {header.numbers<int64_t>("indexes"),
          header.has("generations") ? header.numbers<uint64_t>("generations") : std::vector<uint64_t>{},
          optional_text(header, "admin_token")};
}

Frames encode_stats_reply(const StorageStats& stats) {
  MsgpackMapWriter header;
  header.set("samples").unsigned_integer(stats.samples);
  header.set("bytes").unsigned_integer(stats.bytes);
  header.set("overhead_bytes").unsigned_integer(stats.overhead_bytes);
  return header_message(header);
}

StorageStats decode_stats_reply(const Frames& reply) {
  const EncodedMap header = wire::read_header(reply, 0, reply_name(kStats), {"samples", "bytes", "overhead_bytes"});
  StorageStats out;
  out.samples = count(header, "samples");
  out.bytes = count(header, "bytes");
  out.overhead_bytes = count(header, "overhead_bytes");
  return out;
}

Frames encode_save_request(const SaveRequest& request) {
  MsgpackMapWriter header;
  header.set("path").string(request.path);
  if (request.admin_token) header.set("admin_token").string(*request.admin_token);
  return header_message(header);
}

SaveRequest decode_save_request(const Frames& request) {
  const EncodedMap header = wire::read_header(request, 0, request_name(kSave), {"path", "admin_token"});
  return {header.text("path"), optional_text(header, "admin_token")};
}

Frames encode_save_reply(uint64_t fingerprint) {
  MsgpackMapWriter header;
  header.set("fingerprint").unsigned_integer(fingerprint);
  return header_message(header);
}

uint64_t decode_save_reply(const Frames& reply) {
  const EncodedMap header = wire::read_header(reply, 0, reply_name(kSave), {"fingerprint"});
  return header.unsigned_integer("fingerprint");
}

Frames encode_load_request(const LoadRequest& request) {
  MsgpackMapWriter header;
  header.set("path").string(request.path);
  if (request.fingerprint) header.set("fingerprint").unsigned_integer(*request.fingerprint);
  if (request.check_only) header.set("check_only").boolean(true);
  if (request.admin_token) header.set("admin_token").string(*request.admin_token);
  if (!request.parts.empty()) {
    header.set("unit").unsigned_integer(request.unit);
    header.set("units").unsigned_integer(request.units);
    header.set("parts").strings(request.parts);
  }
  return header_message(header);
}

LoadRequest decode_load_request(const Frames& request) {
  const EncodedMap header = wire::read_header(
      request, 0, request_name(kLoad), {"path", "fingerprint", "check_only", "admin_token", "unit", "units", "parts"});
  LoadRequest out{header.text("path"),
                  std::nullopt,
                  header.has("check_only") && header.boolean("check_only"),
                  optional_text(header, "admin_token"),
                  0,
                  1,
                  {}};
  if (header.has("fingerprint")) out.fingerprint = header.unsigned_integer("fingerprint");
  if (header.has("parts")) {
    out.unit = header.unsigned_integer("unit");
    out.units = header.unsigned_integer("units");
    out.parts = header.texts("parts");
    if (out.parts.size() != out.units) {
      header.fail("parts", "must name one part per unit (" + std::to_string(out.units) + "), got " +
                               std::to_string(out.parts.size()));
    }
    if (out.unit >= out.units || out.parts[out.unit] != out.path) {
      header.fail("unit", "must be below units and name the part at path");
    }
  }
  return out;
}

}  // namespace seqflow::transport::storage_protocol
