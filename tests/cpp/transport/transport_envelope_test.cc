#include <gtest/gtest.h>

#include <string>

#include "transport/envelope.h"
#include "transport/frames.h"
#include "error_matchers.h"

namespace seqflow::transport {
namespace {

using test::throws_invalid;

zmq::message_t bytes(std::string text) { return copy_frame(text); }

std::string with_id(uint64_t id, std::string rest) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(id >> (8 * i));
  return out + rest;
}

TEST(Envelope, RequestRoundTrip) {
  for (uint64_t id : {uint64_t{0}, uint64_t{1}, uint64_t{0x0102030405060708}, ~uint64_t{0}}) {
    const auto frame = encode_request_envelope(id, "get_meta");
    EXPECT_EQ(frame.size(), 8u + 8u);
    const RequestEnvelope envelope = decode_request_envelope(frame);
    EXPECT_EQ(envelope.id, id);
    EXPECT_EQ(envelope.op, "get_meta");
  }
  // Little-endian id, then the name's UTF-8 bytes.
  const auto frame = encode_request_envelope(0x0102030405060708, "größe");
  EXPECT_EQ(as_string_view(frame), with_id(0x0102030405060708, "größe"));
  EXPECT_EQ(as_string_view(frame).substr(0, 2), std::string("\x08\x07"));
  EXPECT_EQ(decode_request_envelope(frame).op, "größe");
  const std::string longest(kMaxOpNameBytes, 'x');
  EXPECT_EQ(decode_request_envelope(encode_request_envelope(7, longest)).op, longest);
}

TEST(Envelope, ABudgetTravelsAfterANulAndOldEnvelopesHaveNone) {
  for (const uint32_t budget : {uint32_t{1}, uint32_t{30000}, ~uint32_t{0}}) {
    const RequestEnvelope envelope = decode_request_envelope(encode_request_envelope(9, "clear_partition", budget));
    EXPECT_EQ(envelope.op, "clear_partition");
    EXPECT_EQ(envelope.budget_ms, budget);
  }
  EXPECT_EQ(as_string_view(encode_request_envelope(1, "ping", 0x01020304)),
            with_id(1, std::string("ping\0\x04\x03\x02\x01", 9)));
  EXPECT_EQ(decode_request_envelope(bytes(with_id(1, "ping"))).budget_ms, 0u);
  EXPECT_TRUE(throws_invalid([] { decode_request_envelope(bytes(with_id(1, std::string("ping\0\x01\x02", 7)))); },
                             {"budget", "2 bytes", "expected 4"}));
  EXPECT_TRUE(throws_invalid([] { decode_request_envelope(bytes(with_id(1, std::string("ping\0\0\0\0\0", 9)))); },
                             {"budget is 0 ms"}));
  EXPECT_TRUE(throws_invalid([] { decode_request_envelope(bytes(with_id(1, std::string("\0\x01\0\0\0", 5)))); },
                             {"operation name", "1..64"}));
  EXPECT_TRUE(throws_invalid([] { encode_request_envelope(1, std::string("pi\0ng", 5)); }, {"NUL"}));
}

TEST(Envelope, ReplyRoundTripForOkAndEveryErrorCode) {
  const auto ok = decode_reply_envelope(encode_reply_envelope(42, std::nullopt));
  EXPECT_EQ(ok.id, 42u);
  EXPECT_FALSE(ok.error.has_value());
  for (ErrorCode code : {ErrorCode::kInvalidArgument, ErrorCode::kNotFound, ErrorCode::kTimeout, ErrorCode::kInternal,
                         ErrorCode::kStaleSample, ErrorCode::kPermissionDenied}) {
    const auto frame = encode_reply_envelope(9, code);
    ASSERT_EQ(frame.size(), 9u);
    EXPECT_EQ(frame.data<unsigned char>()[8], 1 + static_cast<unsigned>(code));
    const auto envelope = decode_reply_envelope(frame);
    EXPECT_EQ(envelope.id, 9u);
    EXPECT_EQ(envelope.error, code);
  }
}

TEST(Envelope, MalformedRequestEnvelopesThrowNamingTheProblem) {
  EXPECT_TRUE(throws_invalid([] { decode_request_envelope(bytes("")); }, {"request envelope is 0 bytes"}));
  EXPECT_TRUE(throws_invalid([] { decode_request_envelope(bytes("1234567")); }, {"7 bytes"}));
  EXPECT_TRUE(throws_invalid([] { decode_request_envelope(bytes(with_id(1, ""))); }, {"8 bytes", "operation name"}));
  EXPECT_TRUE(throws_invalid([] { decode_request_envelope(bytes(with_id(1, std::string(65, 'a')))); },
                             {"operation name", "1..64", "65 bytes"}));
  EXPECT_TRUE(throws_invalid([] { decode_request_envelope(bytes(with_id(1, "\xff\xfe"))); }, {"not UTF-8"}));
  EXPECT_TRUE(throws_invalid([] { decode_request_envelope(bytes(with_id(1, "ab\xc3"))); }, {"not UTF-8"}));
  EXPECT_TRUE(throws_invalid([] { decode_request_envelope(bytes(with_id(1, "\xc0\xaf"))); }, {"not UTF-8"}));
  EXPECT_TRUE(throws_invalid([] { decode_request_envelope(bytes(with_id(1, "\xed\xa0\x80"))); }, {"not UTF-8"}));
}

TEST(Envelope, MalformedReplyEnvelopesThrowNamingTheProblem) {
  EXPECT_TRUE(throws_invalid([] { decode_reply_envelope(bytes("")); }, {"reply envelope is 0 bytes", "expected 9"}));
  EXPECT_TRUE(throws_invalid([] { decode_reply_envelope(bytes(with_id(1, ""))); }, {"8 bytes"}));
  EXPECT_TRUE(throws_invalid([] { decode_reply_envelope(bytes(with_id(1, "xy"))); }, {"10 bytes"}));
  EXPECT_TRUE(throws_invalid([] { decode_reply_envelope(bytes(with_id(1, "\x07"))); }, {"status byte 7"}));
  EXPECT_TRUE(throws_invalid([] { decode_reply_envelope(bytes(with_id(1, "\xff"))); }, {"status byte 255"}));
}

TEST(Envelope, EncoderRejectsBadOpNames) {
  EXPECT_TRUE(throws_invalid([] { encode_request_envelope(1, ""); }, {"0 bytes"}));
  EXPECT_TRUE(throws_invalid([] { encode_request_envelope(1, std::string(100, 'x')); }, {"100 bytes"}));
  EXPECT_TRUE(throws_invalid([] { encode_request_envelope(1, "\x80"); }, {"not UTF-8"}));
}

TEST(Envelope, RequestIdOfAMalformedFrame) {
  EXPECT_EQ(request_id_or_zero(bytes("short")), 0u);
  EXPECT_EQ(request_id_or_zero(bytes(with_id(77, ""))), 77u);
  EXPECT_EQ(request_id_or_zero(bytes(with_id(78, std::string(500, '\xff')))), 78u);
}

}  // namespace
}  // namespace seqflow::transport
