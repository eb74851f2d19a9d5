// The wire codec of the controller and storage services: every request and
// reply carries one MessagePack header frame, then raw data frames (tensor
// bytes, never re-encoded). Numeric arrays travel as MessagePack binaries of
// little-endian values. Decoding never trusts the peer: unknown keys, wrong
// types, bad sizes and deep nesting are kInvalidArgument errors that name
// the key. The pieces shared by both protocols (control_protocol.h,
// storage_protocol.h) are declared here and defined one concept per file:
// wire_header.cc (header frames, Header), schema_codec.cc,
// batch_meta_codec.cc, meta_request_codec.cc, kv_list_codec.cc,
// sample_keys_codec.cc, field_versions_codec.cc, committed_write_codec.cc,
// status_codec.cc, column_codec.cc (columns and views).
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "transport/frames.h"
#include "seqflow/controller.h"
#include "seqflow/field_versions.h"
#include "seqflow/limits.h"
#include "seqflow/storage.h"
#include "seqflow/tensor.h"

namespace seqflow::transport::wire {

using Json = nlohmann::json;

zmq::message_t header_frame(const Json& header);
// A message of just that header: most requests and replies.
inline Frames header_message(zmq::message_t header) {
  Frames frames;
  frames.push_back(std::move(header));
  return frames;
}
inline Frames header_message(const Json& header) { return header_message(header_frame(header)); }
// frames[index] decoded; it must be a map. `what` names the message.
Json read_header(const Frames& frames, size_t index, std::string_view what);
// How errors name an op's messages: "<op> request", "<op> reply".
std::string request_name(std::string_view op);
std::string reply_name(std::string_view op);
// A message whose header is an empty map (a request or reply with no keys),
// and its reader, which refuses any key.
Frames empty_message();
void read_empty_message(const Frames& frames, std::string_view what);

// A decoded header whose keys are checked against the allowed ones.
class Header {
 public:
  Header(Json header, std::string_view what, std::initializer_list<std::string_view> allowed);

  bool has(std::string_view key) const;
  const Json& at(std::string_view key) const;  // throws naming a missing key
  std::string text(std::string_view key) const;
  int64_t integer(std::string_view key) const;
  bool boolean(std::string_view key) const;
  std::vector<std::string> texts(std::string_view key) const;
  std::vector<Value> objects(std::string_view key) const;  // objects, or null for "none"
  template <typename T>
  std::vector<T> numbers(std::string_view key) const;

  [[noreturn]] void fail(std::string_view key, std::string_view problem) const;
  const std::string& what() const { return what_; }

 private:
  Json header_;
  std::string what_;
};

// frames[index] decoded as a Header of `allowed` keys: what every decoder
// of a message does first.
Header read_header(const Frames& frames, size_t index, std::string_view what,
                   std::initializer_list<std::string_view> allowed);

// Objects (custom_meta, tags) as a JSON array; Header::objects reads it.
Json encode_objects(std::span<const Value> values);

template <typename T>
Json binary_of(std::span<const T> values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return Json::binary(std::move(bytes));
}

template <typename T>
std::vector<T> Header::numbers(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_binary()) fail(key, "must be a binary array");
  const auto& bytes = value.get_binary();
  if (bytes.size() % sizeof(T) != 0) fail(key, "holds a partial element");
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

Json encode_schemas(const std::map<std::string, FieldSchema>& schemas);
std::map<std::string, FieldSchema> decode_schemas(const Json& value, std::string_view what);

// The messages of every get_meta skip the JSON tree: they are written as
// MessagePack and read from a frame's bytes directly (a tree cost a round
// trip ~30 us). The Json forms below are the same encoding, for callers that
// build or edit headers as JSON (tests, fuzzing).
zmq::message_t batch_meta_frame(const BatchMeta& meta);
BatchMeta read_batch_meta(const Frames& frames, size_t index, std::string_view what);
zmq::message_t meta_request_frame(const MetaRequest& request);
MetaRequest read_meta_request(const Frames& frames, size_t index, std::string_view what);

// kv_list's reply: keys and their tags (still MessagePack) back to back,
// with offsets, so 100k keys cost one copy, not a JSON tree. read_kv_list
// takes frames[index] over: the listings read the keys where it holds them.
zmq::message_t kv_list_frame(const std::vector<PartitionKeys>& listed);
// kv_list's request: the partition (null: every one) and the version of
// each listing the asker holds, which come back as PartitionKeys::unchanged
// when they still hold.
Json kv_list_request(const std::string* partition_id, const std::map<std::string, ListingVersion>& known);
std::map<std::string, ListingVersion> read_known_listings(const Header& request);
std::vector<PartitionKeys> read_kv_list(Frames& frames, size_t index, std::string_view what);

Json encode_batch_meta(const BatchMeta& meta);
BatchMeta decode_batch_meta(const Json& value, std::string_view what);

Json encode_kv_list(const std::vector<PartitionKeys>& listed);
std::vector<PartitionKeys> decode_kv_list(const Json& value, std::string_view what);

Json encode_meta_request(const MetaRequest& request);
MetaRequest decode_meta_request(const Json& value, std::string_view what);

// The samples of a storage put, get or commit: "indexes", "partitions" with
// "partition_ends" (runs of equal names, as in a BatchMeta), "generations"
// (absent when not known), "write_version" (a put's or commit's; absent
// when 0) and "read_versions" (a get's: field -> binary u64 array, one
// version per sample; absent when none). add_sample_keys writes those of
// `samples` at `positions` (one unit's), in that order. read_sample_keys
// reads those present: the request's Header says which it allows.
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
void add_sample_keys(Json& header, const SampleKeys& samples, std::span<const size_t> positions);
SampleKeyColumns read_sample_keys(const Header& header);

// mark_produced's reply: an overwrite's CommittedWrite ("versions": field ->
// binary u64 array, one per sample; "newer_meta_positions" and
// "newer_metas" when some); a first write's is empty. The decoder checks
// every count against the `samples` the request named.
Json encode_committed_write(const CommittedWrite& committed);
CommittedWrite decode_committed_write(const Json& reply, size_t samples, std::string_view what);

// Per-sample flags by global index (status queries).
Json encode_status(const std::vector<std::pair<int64_t, bool>>& status);
std::vector<std::pair<int64_t, bool>> decode_status(const Json& value, std::string_view what);

// Columns restricted to the samples at `positions` (all of them when empty):
// one header entry and one frame per column. The frame points into the
// column's buffer when those samples lie back to back there, else it holds a
// packed copy of them.
Json append_columns(const std::vector<Column>& columns, std::span<const size_t> positions, Frames& frames);
// As append_columns, without frames: column c's frame would be its
// samples' bytes back to back, and pieces[c] (appended) says where each
// sample's bytes lie, for a reader that copies them out of this process
// (local_copy).
Json describe_columns(const std::vector<Column>& columns, std::span<const size_t> positions,
                      std::vector<std::vector<std::span<const std::byte>>>& pieces);
// The columns of a put: header entries plus frames from `frames[first]` on,
// taken over without copying. Each holds `samples` samples.
std::vector<Column> take_columns(const Json& entries, Frames& frames, size_t first, size_t samples,
                                 std::string_view what);

// Stored values (rows of views, one per requested field) as a header entry
// plus frames appended to `frames`: views that lie back to back in one
// buffer share one frame, which points into the stored buffer. take_views
// reads them back from frames[first] on, `first` being frames.size() when
// append_views began.
Json append_views(const std::vector<std::vector<SampleView>>& rows, size_t fields, Frames& frames);
std::vector<std::vector<SampleView>> take_views(const Json& entry, Frames& frames, size_t first, size_t rows,
                                                size_t fields, std::string_view what);

}  // namespace seqflow::transport::wire
