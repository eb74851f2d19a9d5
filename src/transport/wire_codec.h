// The wire codec of the controller and storage services: every request and
// reply carries one MessagePack header frame, then raw data frames (tensor
// bytes, never re-encoded). Numeric arrays travel as MessagePack binaries of
// little-endian values. Headers are written with MsgpackMapWriter (keys in
// byte order, as every earlier build wrote them) or, for the hot messages,
// straight with MsgpackWriter, and read in place as an EncodedMap
// (common/encoded_map.h). Decoding never trusts the peer: unknown keys, wrong
// types, bad sizes and deep nesting are kInvalidArgument errors that name
// the key. The pieces shared by both protocols (control_protocol.h,
// storage_protocol.h) are declared here and defined one concept per file:
// wire_header.cc (header frames), schema_codec.cc, batch_meta_codec.cc,
// meta_request_codec.cc, kv_list_codec.cc, sample_keys_codec.cc,
// field_versions_codec.cc, committed_write_codec.cc, status_codec.cc,
// column_codec.cc (columns and views).
//
// An encoded value (a header's columns, views or same-host description) is
// a std::string of its MessagePack bytes; its readers take it as the value
// of a header key, inside one container.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/encoded_map.h"
#include "common/msgpack_map_writer.h"
#include "seqflow/controller.h"
#include "seqflow/field_versions.h"
#include "seqflow/limits.h"
#include "seqflow/storage.h"
#include "seqflow/tensor.h"
#include "transport/frames.h"

namespace seqflow::transport::wire {

// How deep a header's value lies: inside the header's map.
inline constexpr size_t kValueDepth = 1;

zmq::message_t header_frame(const MsgpackMapWriter& header);
// A message of just that header: most requests and replies.
inline Frames header_message(zmq::message_t header) {
  Frames frames;
  frames.push_back(std::move(header));
  return frames;
}
inline Frames header_message(const MsgpackMapWriter& header) { return header_message(header_frame(header)); }
// How errors name an op's messages: "<op> request", "<op> reply".
std::string request_name(std::string_view op);
std::string reply_name(std::string_view op);
// A message whose header is an empty map (a request or reply with no keys),
// and its reader, which refuses any key.
Frames empty_message();
void read_empty_message(const Frames& frames, std::string_view what);

// frames[index], which must be there.
std::string_view header_bytes(const Frames& frames, size_t index, std::string_view what);
// A header frame's bytes as a map of `allowed` keys, checked whole first:
// malformed MessagePack is "<what> header is not valid MessagePack: ...",
// another value "<what> header must be a MessagePack map, got <type>".
EncodedMap encoded_header(std::string_view bytes, std::string_view what,
                          std::initializer_list<std::string_view> allowed);
// frames[index] so read: what every decoder of a message does first. The
// map reads the frame in place: it must not be moved or changed meanwhile.
EncodedMap read_header(const Frames& frames, size_t index, std::string_view what,
                       std::initializer_list<std::string_view> allowed);

// Objects (custom_meta, tags) as an array of maps; EncodedMap::objects reads it.
void write_objects(MsgpackWriter& out, std::span<const Value> values);

// The partition of each of `samples` samples, sent as runs: "partitions"
// (names) and "partition_ends".
PartitionIdList partition_runs(const EncodedMap& header, size_t samples);

// The messages of every get_meta are written as MessagePack and read from a
// frame's bytes directly (a tree cost a round trip ~30 us).
zmq::message_t batch_meta_frame(const BatchMeta& meta);
BatchMeta read_batch_meta(const Frames& frames, size_t index, std::string_view what);
zmq::message_t meta_request_frame(const MetaRequest& request);
MetaRequest read_meta_request(const Frames& frames, size_t index, std::string_view what);

// kv_list's reply: keys and their tags (still MessagePack) back to back,
// with offsets, so 100k keys cost one copy, not a tree. read_kv_list takes
// frames[index] over: the listings read the keys where it holds them.
zmq::message_t kv_list_frame(const std::vector<PartitionKeys>& listed);
std::vector<PartitionKeys> read_kv_list(Frames& frames, size_t index, std::string_view what);
// kv_list's request: the partition (null: every one) and the version of
// each listing the asker holds, which come back as PartitionKeys::unchanged
// when they still hold.
MsgpackMapWriter kv_list_request(const std::string* partition_id, const std::map<std::string, ListingVersion>& known);
std::map<std::string, ListingVersion> read_known_listings(const EncodedMap& request);

// The samples of a storage put, get or commit: "indexes", "partitions" with
// "partition_ends" (runs of equal names, as in a BatchMeta), "generations"
// (absent when not known), "write_version" (a put's or commit's; absent
// when 0) and "read_versions" (a get's: field -> binary u64 array, one
// version per sample; absent when none). add_sample_keys writes those of
// `samples` at `positions` (one unit's), in that order. read_sample_keys
// reads those present: the request's map says which it allows.
struct SampleKeyColumns {
  std::vector<int64_t> global_indexes;
  PartitionIdList partitions;
  std::vector<uint64_t> generations;
  uint64_t write_version = 0;
  FieldVersions read_versions;
  SampleKeys keys() const {
    return {global_indexes, partitions, generations, write_version, read_versions.empty() ? nullptr : &read_versions};
  }
};
void add_sample_keys(MsgpackMapWriter& header, const SampleKeys& samples, std::span<const size_t> positions);
SampleKeyColumns read_sample_keys(const EncodedMap& header);

// mark_produced's reply: an overwrite's CommittedWrite ("versions": field ->
// binary u64 array, one per sample; "newer_meta_positions" and
// "newer_metas" when some); a first write's is empty. The reader checks
// every count against the `samples` the request named.
MsgpackMapWriter committed_write_header(const CommittedWrite& committed);
CommittedWrite read_committed_write(const EncodedMap& reply, size_t samples);

// Per-sample flags by global index (status queries): a map of "indexes" and
// "flags".
void write_status(MsgpackWriter& out, const std::vector<std::pair<int64_t, bool>>& status);
std::vector<std::pair<int64_t, bool>> read_status(const EncodedMap& status);

// Columns restricted to the samples at `positions` (all of them when empty):
// one entry of the encoded array returned and one frame per column. The
// frame points into the column's buffer when those samples lie back to back
// there, else it holds a packed copy of them.
std::string append_columns(const std::vector<Column>& columns, std::span<const size_t> positions, Frames& frames);
// A put's columns in segments of consecutive samples: the entries of every
// segment's columns (segment after segment, each as append_columns writes
// them) and each segment's number of samples (empty: one segment).
struct ColumnSegments {
  std::string entries;
  std::vector<uint64_t> samples;
};
// As append_columns, in segments that spare the packed copy: a run of
// consecutive positions whose frames average kMinRunFrameBytes or more is a
// segment of its own, its frames pointing into the columns' buffers; the
// shorter runs between such runs are packed together into one segment.
inline constexpr size_t kMinRunFrameBytes = size_t{64} << 10;
ColumnSegments append_column_segments(const std::vector<Column>& columns, std::span<const size_t> positions,
                                      Frames& frames);
// As append_columns, without frames: column c's frame would be its
// samples' bytes back to back, and pieces[c] (appended) says where each
// sample's bytes lie, for a reader that copies them out of this process
// (local_copy).
std::string describe_columns(const std::vector<Column>& columns, std::span<const size_t> positions,
                             std::vector<std::vector<std::span<const std::byte>>>& pieces);
// How many columns the encoded entries name (0 when they are no array).
size_t column_count(std::string_view entries);
// The columns of a put: the encoded entries plus frames from `frames[first]`
// on, taken over without copying (but for frames under kReceiveBatchBytes,
// copied so that they hold no receive buffer). Each holds `samples` samples.
std::vector<Column> take_columns(std::string_view entries, Frames& frames, size_t first, size_t samples,
                                 std::string_view what);
// As take_columns, for a put in segments (append_column_segments): segment k
// holds segment_samples[k] samples (one segment of all `samples` when
// empty), each naming the same fields in the same order.
std::vector<std::vector<Column>> take_column_segments(std::string_view entries, Frames& frames, size_t first,
                                                      std::span<const uint64_t> segment_samples, size_t samples,
                                                      std::string_view what);

// Stored values (rows of views, one per requested field) as an encoded
// array plus frames appended to `frames`: views that lie back to back in
// one buffer share one frame, which points into the stored buffer.
// take_views reads them back from frames[first] on, `first` being
// frames.size() when append_views began.
std::string append_views(const std::vector<std::vector<SampleView>>& rows, size_t fields, Frames& frames);
std::vector<std::vector<SampleView>> take_views(std::string_view entries, Frames& frames, size_t first, size_t rows,
                                                size_t fields, std::string_view what);

}  // namespace seqflow::transport::wire
