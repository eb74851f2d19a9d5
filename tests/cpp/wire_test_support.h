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

#include "net/frames.h"
#include "sample_keys_support.h"
#include "net/wire_codec.h"

namespace seqflow::test {

// A storage put or get request header naming `indexes` (see samples_of).
inline net::wire::Json storage_request(const std::vector<int64_t>& indexes) {
  net::wire::Json header = net::wire::Json::object();
  std::vector<size_t> all(indexes.size());
  std::iota(all.begin(), all.end(), size_t{0});
  net::wire::add_sample_keys(header, samples_of(indexes), all);
  return header;
}

// `header` as the peer sees it: MessagePack in one frame, read back.
inline net::wire::Json through_wire(const net::wire::Json& header, std::string_view what = "test message") {
  net::Frames frames;
  frames.push_back(net::wire::header_frame(header));
  return net::wire::read_header(frames, 0, what);
}

// Bytes as one frame, as a peer may send them.
inline net::Frames frames_of_bytes(std::string_view bytes) {
  net::Frames frames;
  frames.push_back(net::copy_frame(bytes));
  return frames;
}

inline net::Frames frames_of_bytes(const std::vector<uint8_t>& bytes) {
  return frames_of_bytes(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

// take_columns and take_views take the frames over: each decode gets copies.
inline net::Frames copies(const net::Frames& frames) {
  net::Frames out;
  for (const auto& frame : frames) out.push_back(net::copy_frame(net::as_bytes(frame)));
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
