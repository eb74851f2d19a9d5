#include "common/msgpack_reader.h"

#include <string>
#include <utility>

#include "seqflow/error.h"

namespace seqflow {
namespace {

using Kind = MsgpackReader::Kind;

}  // namespace

// Recursion is bounded by the reader's depth limit.
Value read_value(MsgpackReader& reader, size_t depth) {
  const size_t start = reader.position();
  const MsgpackReader::Token token = reader.next(depth);
  switch (token.kind) {
    case Kind::kNull:
      return Value();
    case Kind::kBool:
      return token.number != 0;
    case Kind::kUnsigned:
      return token.number;
    case Kind::kSigned:
      return token.integer;
    case Kind::kFloat:
      return token.real;
    case Kind::kString:
      return std::string_view(token.bytes);
    case Kind::kBinary:
      reader.fail("binary data (which a Value cannot hold)", start);
    case Kind::kArray: {
      Value::Array out;
      out.reserve(token.number);
      for (uint64_t i = 0; i < token.number; ++i) out.push_back(read_value(reader, depth + 1));
      return out;
    }
    case Kind::kMap:
      break;
  }
  Value::Object out;
  for (uint64_t i = 0; i < token.number; ++i) {
    const std::string_view key = reader.key();
    out.insert_or_assign(std::string(key), read_value(reader, depth + 1));  // a repeated key: the last one wins
  }
  return out;
}

void MsgpackReader::fail(std::string_view problem, size_t at) const {
  throw_invalid("is not valid MessagePack: " + std::string(problem) + " at byte " + std::to_string(at));
}

void MsgpackReader::too_deep(const char* start) const {
  throw_invalid("nests deeper than " + std::to_string(max_depth_) + " levels at byte " +
                std::to_string(start - begin_));
}

void MsgpackReader::overrun(Kind kind, uint64_t count, const char* start) const {
  fail(kind == Kind::kMap ? "a map of " + std::to_string(count) + " pairs overruns the data"
                          : "an array of " + std::to_string(count) + " elements overruns the data",
       static_cast<size_t>(start - begin_));
}

// Recursion is bounded by the depth limit.
MsgpackReader::Kind MsgpackReader::skip(size_t depth) {
  const Token token = next(depth);
  if (token.kind == Kind::kArray || token.kind == Kind::kMap) {
    for (uint64_t i = 0; i < token.number; ++i) {
      if (token.kind == Kind::kMap) key();
      skip(depth + 1);
    }
  }
  return token.kind;
}

void MsgpackReader::finish() const {
  if (at_ != end_) fail(std::to_string(left()) + " bytes follow the value", position());
}

Value msgpack_to_value(std::string_view bytes, size_t max_depth) {
  MsgpackReader reader(bytes, max_depth);
  Value out = read_value(reader, 0);
  reader.finish();
  return out;
}

void check_msgpack_map(std::string_view bytes, size_t max_depth) {
  MsgpackReader reader(bytes, max_depth);
  const Kind kind = reader.skip(0);
  reader.finish();
  if (kind != Kind::kMap) throw_invalid("must be a MessagePack map");
}

}  // namespace seqflow
