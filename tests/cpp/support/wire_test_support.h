// Helpers of the wire codec tests, the service tests and the wire decoder
// fuzz target (so no test framework): headers as trees (msgpack_tree.h) and
// frames, bytes as a frame, copies of frames for decoders that take them
// over, and deeply nested MessagePack.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "msgpack_tree.h"
#include "sample_keys_support.h"
#include "transport/frames.h"
#include "transport/wire_codec.h"

namespace seqflow::test {

// A frame's MessagePack as a tree, and back.
inline Tree tree_of(const zmq::message_t& frame) { return Tree::read(transport::as_string_view(frame)); }
inline zmq::message_t tree_frame(const Tree& tree) { return transport::copy_frame(tree.bytes()); }
// A message of one header frame.
inline transport::Frames message_of(const Tree& header) {
  transport::Frames frames;
  frames.push_back(tree_frame(header));
  return frames;
}
inline Tree tree_of(const MsgpackMapWriter& header) { return Tree::read(header.bytes()); }

// A tree's bytes read as a header of `allowed` keys, as decoders take it
// (the bytes live as long as the map, which reads them in place).
class TreeHeader {
 public:
  TreeHeader(const Tree& tree, std::string_view what, std::initializer_list<std::string_view> allowed)
      : bytes_(tree.bytes()), map_(transport::wire::encoded_header(bytes_, what, allowed)) {}
  TreeHeader(const TreeHeader&) = delete;
  TreeHeader& operator=(const TreeHeader&) = delete;
  operator const EncodedMap&() const { return map_; }
  const EncodedMap& map() const { return map_; }

 private:
  std::string bytes_;
  EncodedMap map_;
};

// The messages of the codecs that write MessagePack directly, as trees, and
// back through a frame: what the tests and the fuzz target spoil.
inline Tree encode_batch_meta(const BatchMeta& meta) { return tree_of(transport::wire::batch_meta_frame(meta)); }
inline BatchMeta decode_batch_meta(const Tree& header, std::string_view what) {
  return transport::wire::read_batch_meta(message_of(header), 0, what);
}
inline Tree encode_meta_request(const MetaRequest& request) {
  return tree_of(transport::wire::meta_request_frame(request));
}
inline MetaRequest decode_meta_request(const Tree& header, std::string_view what) {
  return transport::wire::read_meta_request(message_of(header), 0, what);
}
inline Tree encode_kv_list(const std::vector<PartitionKeys>& listed) {
  return tree_of(transport::wire::kv_list_frame(listed));
}
inline std::vector<PartitionKeys> decode_kv_list(const Tree& header, std::string_view what) {
  transport::Frames frames = message_of(header);
  return transport::wire::read_kv_list(frames, 0, what);
}
inline Tree encode_status(const std::vector<std::pair<int64_t, bool>>& status) {
  MsgpackWriter out;
  transport::wire::write_status(out, status);
  return Tree::read(out.bytes());
}
inline std::vector<std::pair<int64_t, bool>> decode_status(const Tree& header, std::string_view what) {
  return transport::wire::read_status(TreeHeader(header, what, {"indexes", "flags"}));
}

// A storage put or get request header naming `indexes` (see samples_of).
inline Tree storage_request(const std::vector<int64_t>& indexes) {
  MsgpackMapWriter header;
  std::vector<size_t> all(indexes.size());
  std::iota(all.begin(), all.end(), size_t{0});
  transport::wire::add_sample_keys(header, samples_of(indexes), all);
  return tree_of(header);
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
