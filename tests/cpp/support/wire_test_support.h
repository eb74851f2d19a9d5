// Helpers of the wire codec tests, the service tests and the wire decoder
// fuzz target (so no test framework): a header through a real frame, bytes
// as a frame, copies of frames for decoders that take them over, and deeply
// nested MessagePack.
#pragma once

#include <cstddef>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "transport/frames.h"
#include "sample_keys_support.h"
#include "transport/wire_codec.h"

namespace seqflow::test {

// A storage put or get request header naming `indexes` (see samples_of).
inline transport::wire::Json storage_request(const std::vector<int64_t>& indexes) {
  transport::wire::Json header = transport::wire::Json::object();
  std::vector<size_t> all(indexes.size());
  std::iota(all.begin(), all.end(), size_t{0});
  transport::wire::add_sample_keys(header, samples_of(indexes), all);
  return header;
}

// `header` as the peer sees it: MessagePack in one frame, read back.
inline transport::wire::Json through_wire(const transport::wire::Json& header, std::string_view what = "test message") {
  transport::Frames frames;
  frames.push_back(transport::wire::header_frame(header));
  return transport::wire::read_header(frames, 0, what);
}

// Bytes as one frame, as a peer may send them.
inline transport::Frames frames_of_bytes(std::string_view bytes) {
  transport::Frames frames;
  frames.push_back(transport::copy_frame(bytes));
  return frames;
}

inline transport::Frames frames_of_bytes(const std::vector<uint8_t>& bytes) {
  return frames_of_bytes(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

// take_columns and take_views take the frames over: each decode gets copies.
inline transport::Frames copies(const transport::Frames& frames) {
  transport::Frames out;
  for (const auto& frame : frames) out.push_back(transport::copy_frame(transport::as_bytes(frame)));
  return out;
}

// {"x": [[...[1]...]]}: `depth` levels of maps and arrays in all (depth >= 1).
inline std::string nested_msgpack(size_t depth) {
  std::string bytes = "\x81\xa1x";
  bytes.append(depth - 1, '\x91');
  bytes.push_back('\x01');
  return bytes;
}

}  // namespace seqflow::test
