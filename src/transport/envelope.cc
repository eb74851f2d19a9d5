#include "transport/envelope.h"

#include <cstring>

namespace seqflow::transport {
namespace {

constexpr size_t kReplyEnvelopeBytes = kRequestIdBytes + 1;
constexpr size_t kBudgetBytes = 4;

void put_id(uint64_t id, unsigned char* out) {
  for (size_t i = 0; i < kRequestIdBytes; ++i) out[i] = static_cast<unsigned char>(id >> (8 * i));
}

uint64_t get_id(const unsigned char* in) {
  uint64_t id = 0;
  for (size_t i = 0; i < kRequestIdBytes; ++i) id |= static_cast<uint64_t>(in[i]) << (8 * i);
  return id;
}

// Well-formed UTF-8 (RFC 3629): no overlong forms, surrogates or code points
// above U+10FFFF, so that an op name can be echoed in error messages and logs.
bool is_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t length = 0;
    uint32_t code = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2, code = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, code = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, code = lead & 0x07;
    } else {
      return false;
    }
    if (text.size() - i < length) return false;
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += length;
  }
  return true;
}

// The switch has no default so that a new ErrorCode makes the compiler point here.
bool is_error_code(unsigned value) {
  switch (static_cast<ErrorCode>(value)) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
    case ErrorCode::kTimeout:
    case ErrorCode::kInternal:
    case ErrorCode::kStaleSample:
    case ErrorCode::kPermissionDenied:
      return true;
  }
  return false;
}

}  // namespace

void check_op_name(std::string_view op) {
  if (op.empty() || op.size() > kMaxOpNameBytes) {
    throw_invalid("operation name must be 1.." + std::to_string(kMaxOpNameBytes) + " bytes, got " +
                  std::to_string(op.size()) + " bytes");
  }
  if (!is_utf8(op)) throw_invalid("operation name of " + std::to_string(op.size()) + " bytes is not UTF-8");
  if (op.find('\0') != std::string_view::npos) throw_invalid("operation name holds a NUL byte");
}

zmq::message_t encode_request_envelope(uint64_t id, std::string_view op, uint32_t budget_ms) {
  check_op_name(op);
  zmq::message_t frame(kRequestIdBytes + op.size() + (budget_ms == 0 ? 0 : 1 + kBudgetBytes));
  auto* out = frame.data<unsigned char>();
  put_id(id, out);
  std::memcpy(out + kRequestIdBytes, op.data(), op.size());
  if (budget_ms != 0) {
    unsigned char* budget = out + kRequestIdBytes + op.size();
    budget[0] = 0;
    for (size_t i = 0; i < kBudgetBytes; ++i) budget[1 + i] = static_cast<unsigned char>(budget_ms >> (8 * i));
  }
  return frame;
}

zmq::message_t encode_reply_envelope(uint64_t id, std::optional<ErrorCode> error) {
  zmq::message_t frame(kReplyEnvelopeBytes);
  auto* out = frame.data<unsigned char>();
  put_id(id, out);
  out[kRequestIdBytes] = error ? static_cast<unsigned char>(1 + static_cast<unsigned>(*error)) : 0;
  return frame;
}

RequestEnvelope decode_request_envelope(const zmq::message_t& frame) {
  if (frame.size() <= kRequestIdBytes) {
    throw_invalid("request envelope is " + std::to_string(frame.size()) + " bytes; it needs an " +
                  std::to_string(kRequestIdBytes) + "-byte request id and an operation name");
  }
  const auto* in = frame.data<unsigned char>();
  RequestEnvelope envelope;
  envelope.id = get_id(in);
  std::string_view op(frame.data<char>() + kRequestIdBytes, frame.size() - kRequestIdBytes);
  if (const size_t nul = op.find('\0'); nul != std::string_view::npos) {
    if (op.size() - nul != 1 + kBudgetBytes) {
      throw_invalid("request envelope's budget is " + std::to_string(op.size() - nul - 1) + " bytes, expected " +
                    std::to_string(kBudgetBytes));
    }
    for (size_t i = 0; i < kBudgetBytes; ++i)
      envelope.budget_ms |= uint32_t{in[kRequestIdBytes + nul + 1 + i]} << (8 * i);
    if (envelope.budget_ms == 0) throw_invalid("request envelope's budget is 0 ms");
    op = op.substr(0, nul);
  }
  check_op_name(op);
  envelope.op = op;
  return envelope;
}

ReplyEnvelope decode_reply_envelope(const zmq::message_t& frame) {
  if (frame.size() != kReplyEnvelopeBytes) {
    throw_invalid("reply envelope is " + std::to_string(frame.size()) + " bytes, expected " +
                  std::to_string(kReplyEnvelopeBytes));
  }
  const auto* in = frame.data<unsigned char>();
  ReplyEnvelope envelope;
  envelope.id = get_id(in);
  const unsigned status = in[kRequestIdBytes];
  if (status != 0) {
    if (!is_error_code(status - 1)) {
      throw_invalid("reply status byte " + std::to_string(status) + " is neither 0 (ok) nor 1 + a known error code");
    }
    envelope.error = static_cast<ErrorCode>(status - 1);
  }
  return envelope;
}

uint64_t request_id_or_zero(const zmq::message_t& frame) {
  return frame.size() < kRequestIdBytes ? 0 : get_id(frame.data<unsigned char>());
}

}  // namespace seqflow::transport
