// The transport envelope: the first frame of every request and reply.
//
//   request  [envelope, args...]     envelope = 8-byte LE request id + op name (UTF-8, 1..64 bytes, no NUL)
//                                    [+ NUL + 4-byte LE budget in ms: how long the client waits for the reply]
//   reply    [envelope, results...]  envelope = 8-byte LE request id + status byte
//
// The budget is the request's deadline as the service can know it (it
// counts from the request's arrival): a service never starts work whose
// client has given up, and no blocking wait outlasts it.
//
// Status 0 is success; otherwise it is 1 + the numeric value of the
// seqflow::ErrorCode, and the reply carries exactly one result: the message.
// A reply with id 0 answers no request: a service's probe of whether a
// client that waits for a deferred reply is still connected. Clients
// discard it.
#pragma once

#include <zmq.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "seqflow/error.h"

namespace seqflow::transport {

inline constexpr size_t kRequestIdBytes = 8;
inline constexpr size_t kMaxOpNameBytes = 64;

struct RequestEnvelope {
  uint64_t id = 0;
  std::string op;
  uint32_t budget_ms = 0;  // 0: none given
};

struct ReplyEnvelope {
  uint64_t id = 0;
  std::optional<ErrorCode> error;  // nullopt: success
};

// Throws kInvalidArgument when `op` is empty, longer than kMaxOpNameBytes,
// not UTF-8 or holds a NUL; shared by the encoder and Service::handle.
void check_op_name(std::string_view op);

// budget_ms 0: none (the envelope then ends with the op name).
zmq::message_t encode_request_envelope(uint64_t id, std::string_view op, uint32_t budget_ms = 0);
zmq::message_t encode_reply_envelope(uint64_t id, std::optional<ErrorCode> error);

// Both throw kInvalidArgument naming what is wrong with the frame (its size,
// the op name's length or encoding, the status byte); they never read past it.
RequestEnvelope decode_request_envelope(const zmq::message_t& frame);
ReplyEnvelope decode_reply_envelope(const zmq::message_t& frame);

// The request id of a frame that may be malformed, so that an error reply can
// still name the request; 0 when the frame is shorter than an id.
uint64_t request_id_or_zero(const zmq::message_t& frame);

}  // namespace seqflow::transport
