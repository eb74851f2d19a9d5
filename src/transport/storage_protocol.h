// The storage units' protocol, the one place its op names and keys are
// spelled: ShardedStorage (a client's data) and the controller service (the
// unit ops only it may call: clear, save, load) encode requests and decode
// replies here, and StorageService decodes requests and encodes replies
// here. Sample keys, columns and views keep their wire_codec.h encodings;
// the frames after the header are the data. Decoders check every key, type
// and count and throw kInvalidArgument naming the op and the key.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqflow/storage.h"
#include "transport/frames.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::storage_protocol {

inline constexpr std::string_view kPut = "put";
inline constexpr std::string_view kGet = "get";
inline constexpr std::string_view kCommit = "commit";
inline constexpr std::string_view kDiscard = "discard";
inline constexpr std::string_view kLocalCopySession = "local_copy_session";
inline constexpr std::string_view kRelease = "release";
inline constexpr std::string_view kClear = "clear";
inline constexpr std::string_view kStats = "stats";
inline constexpr std::string_view kSave = "save";
inline constexpr std::string_view kLoad = "load";
inline constexpr std::string_view kRoom = "room";

// Every op above: a storage service registers exactly these.
inline constexpr std::array kOps{kPut,   kGet,  kCommit, kDiscard, kLocalCopySession, kRelease, kClear,
                                 kStats, kSave, kLoad,   kRoom};

// A reply that carries nothing (an empty map); its decoder checks that.
Frames encode_empty_reply();
void decode_empty_reply(const Frames& reply, std::string_view op);

// put: the samples at `positions` of `samples` (one unit's), with their
// columns either as frames after the header (`columns` from
// wire::append_columns) or, for a same-host unit, left in the client's
// memory: `local_frames` (local_copy::seal) says where, and `columns`
// comes from wire::describe_columns. Both are encoded values (wire_codec.h).
// A put answered "full" is sent again with the answer's ticket. Frames sent
// in segments (wire::append_column_segments) name each segment's samples in
// `segment_samples` (`segment_samples`, absent for one segment).
Frames encode_put_request(const SampleKeys& samples, std::span<const size_t> positions, std::string_view columns,
                          Frames data, const std::optional<StorageUnit::Ticket>& ticket = std::nullopt,
                          std::span<const uint64_t> segment_samples = {});
Frames encode_local_put_request(const SampleKeys& samples, std::span<const size_t> positions, std::string_view columns,
                                std::string_view local_frames);
// The frames after the header stay in `request` (wire::take_column_segments
// reads them from frame 1 on); the encoded values are copies, which outlive it.
struct PutRequest {
  wire::SampleKeyColumns samples;
  std::string columns;
  std::vector<uint64_t> segment_samples;  // empty: one segment (always so with local_frames)
  std::optional<std::string> local_frames;
  std::optional<StorageUnit::Ticket> ticket;
};
PutRequest decode_put_request(const Frames& request);
// Empty (stored), or what kept the unit from storing the put: nothing of
// it is stored then.
struct PutReply {
  // Why the unit did not read the client's memory: the client sends the bytes.
  std::optional<std::string> local_copy_refused;
  // The unit's limits leave no room now and it waits for room
  // (WhenFull::kWait), without a thread: the client retries until its put's
  // deadline ("storage full: ..."), with the put's place's ticket (none:
  // it holds no place, max_waiting_puts holding one).
  std::optional<std::string> full;
  std::optional<StorageUnit::Ticket> ticket;
};
Frames encode_put_reply(const PutReply& reply);
PutReply decode_put_reply(const Frames& reply);

// room: before a put answered "full" is sent again, whether it fits now
// (StorageUnit::room_for), asked without its values; or, with `leave`, that
// the put gave up (StorageUnit::leave_line). Only with the put's ticket
// (a required key): the reply of a wrong one is not placed, saying why.
struct RoomRequest {
  StorageUnit::RetriedPut put;
  StorageUnit::Ticket ticket{};
  bool leave = false;
};
Frames encode_room_request(const RoomRequest& request);
RoomRequest decode_room_request(const Frames& request);
Frames encode_room_reply(const StorageUnit::Room& room);
StorageUnit::Room decode_room_reply(const Frames& reply);

// get: the samples' `fields`; `local_copy` (a session id) asks a same-host
// unit to leave the values in its memory for the client to copy. A
// local_copy that is not a binary is no session: the bytes are sent.
struct GetRequest {
  wire::SampleKeyColumns samples;
  std::vector<std::string> fields;
  std::optional<std::vector<uint8_t>> local_copy;
};
Frames encode_get_request(const SampleKeys& samples, std::span<const size_t> positions,
                          const std::vector<std::string>& fields, std::span<const uint8_t> local_copy);
GetRequest decode_get_request(const Frames& request);
// The header of a get's reply, frames[0]: the views (wire::append_views),
// and for values left in the unit's memory their description and the
// lease that holds them until the client releases it.
struct GetReply {
  std::string fields;  // encoded, as the two below
  std::optional<std::string> local_frames;
  std::optional<uint64_t> lease;
};
zmq::message_t encode_get_reply_header(const GetReply& reply);
GetReply decode_get_reply(const Frames& reply);

// commit and discard: the samples' write_version of `fields` made the value
// readers see, or dropped. The write_tag is the controller's for this unit;
// one that is not an unsigned integer is no tag (the unit refuses the call).
struct SettleRequest {
  wire::SampleKeyColumns samples;
  std::vector<std::string> fields;
  std::optional<uint64_t> write_tag;
};
Frames encode_settle_request(const SampleKeys& samples, std::span<const size_t> positions,
                             const std::vector<std::string>& fields, std::optional<uint64_t> write_tag);
SettleRequest decode_settle_request(const Frames& request, std::string_view op);

// local_copy_session: no keys; the reply names the unit's session address.
Frames encode_bare_request();
void decode_bare_request(const Frames& request, std::string_view op);
Frames encode_local_copy_session_reply(const std::string& address);
std::string decode_local_copy_session_reply(const Frames& reply);

// release: a get's lease given back; the reply says whether the unit still
// held it (false: its values may have been torn while copied).
Frames encode_release_request(uint64_t lease);
uint64_t decode_release_request(const Frames& request);
Frames encode_release_reply(bool held);
bool decode_release_reply(const Frames& reply);

// The controller's ops carry the admin token the unit registered with
// (absent: refused by the unit, as from anyone else).
struct ClearRequest {
  std::vector<int64_t> indexes;
  std::vector<uint64_t> generations;  // empty: every generation
  std::optional<std::string> admin_token;
};
Frames encode_clear_request(const ClearRequest& request);
ClearRequest decode_clear_request(const Frames& request);

Frames encode_stats_reply(const StorageStats& stats);
StorageStats decode_stats_reply(const Frames& reply);

struct SaveRequest {
  std::string path;
  std::optional<std::string> admin_token;
};
Frames encode_save_request(const SaveRequest& request);
SaveRequest decode_save_request(const Frames& request);
// The saved file's fingerprint (0: none).
Frames encode_save_reply(uint64_t fingerprint);
uint64_t decode_save_reply(const Frames& reply);

// load: a fingerprint has the unit refuse a file of another save;
// check_only asks only that.
struct LoadRequest {
  std::string path;
  std::optional<uint64_t> fingerprint;
  bool check_only = false;
  std::optional<std::string> admin_token;
  // Where the unit stands (unit `unit` of `units`, storage_routing.h) and
  // every unit's part of the checkpoint in unit order, `path` at `unit`
  // (StorageUnit::load_part); empty: only `path`, as saved.
  uint64_t unit = 0;
  uint64_t units = 1;
  std::vector<std::string> parts;
};
Frames encode_load_request(const LoadRequest& request);
LoadRequest decode_load_request(const Frames& request);

}  // namespace seqflow::transport::storage_protocol
