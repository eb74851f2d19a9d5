// The controller's watch op (seqflow/watch.h): the request's filter, cursor
// and wait; the answer's changes as parallel arrays (kind names, global
// indexes, keys with "" for none, tags with nil for none).
#include <string>

#include "transport/control_protocol.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::control {

using wire::header_message;
using wire::reply_name;
using wire::request_name;

namespace {

ChangeKind parse_change_kind(const EncodedMap& header, const std::string& name) {
  for (ChangeKind kind : {ChangeKind::kInserted, ChangeKind::kProduced, ChangeKind::kTagged, ChangeKind::kCleared,
                          ChangeKind::kPartitionCleared, ChangeKind::kResync}) {
    if (name == change_kind_name(kind)) return kind;
  }
  header.fail("kinds", "holds an unknown kind '" + name.substr(0, 64) + "'");
}

}  // namespace

Frames encode_watch_request(const WatchRequest& request) {
  MsgpackMapWriter header;
  header.set("partition_id").string(request.partition_id);
  header.set("key_prefix").string(request.filter.key_prefix);
  header.set("tag_field").string(request.filter.tag_field);
  header.set("cursor").unsigned_integer(request.cursor);
  header.set("max_changes").integer(request.max_changes);
  header.set("wait_ms").integer(request.wait.count());
  return header_message(header);
}

WatchRequest decode_watch_request(const Frames& request) {
  const EncodedMap header =
      wire::read_header(request, 0, request_name(kWatch),
                        {"partition_id", "key_prefix", "tag_field", "cursor", "max_changes", "wait_ms"});
  WatchRequest decoded;
  decoded.partition_id = header.text("partition_id");
  decoded.filter.key_prefix = header.text("key_prefix");
  decoded.filter.tag_field = header.text("tag_field");
  decoded.cursor = header.unsigned_integer("cursor");
  decoded.max_changes = header.integer("max_changes");
  decoded.wait = std::chrono::milliseconds(header.integer("wait_ms"));
  return decoded;
}

Frames encode_watch_reply(const WatchBatch& batch) {
  std::vector<std::string> kinds;
  std::vector<int64_t> indexes;
  std::vector<std::string> keys;
  std::vector<Value> tags;
  kinds.reserve(batch.changes.size());
  indexes.reserve(batch.changes.size());
  keys.reserve(batch.changes.size());
  tags.reserve(batch.changes.size());
  for (const Change& change : batch.changes) {
    kinds.emplace_back(change_kind_name(change.kind));
    indexes.push_back(change.global_index);
    keys.push_back(change.key.value_or(""));
    tags.push_back(change.tag.value_or(Value()));
  }
  MsgpackMapWriter header;
  header.set("kinds").strings(kinds);
  header.set("global_indexes").numbers(std::span<const int64_t>(indexes));
  header.set("keys").strings(keys);
  wire::write_objects(header.set("tags"), tags);
  header.set("cursor").unsigned_integer(batch.cursor);
  header.set("resync").boolean(batch.resync);
  return header_message(header);
}

WatchBatch decode_watch_reply(const Frames& reply) {
  const EncodedMap header =
      wire::read_header(reply, 0, reply_name(kWatch), {"kinds", "global_indexes", "keys", "tags", "cursor", "resync"});
  const std::vector<std::string> kinds = header.texts("kinds");
  if (kinds.size() > static_cast<size_t>(kMaxWatchChanges)) {
    header.fail("kinds",
                "holds " + std::to_string(kinds.size()) + " changes, more than " + std::to_string(kMaxWatchChanges));
  }
  const auto indexes = header.numbers<int64_t>("global_indexes");
  std::vector<std::string> keys = header.texts("keys");
  std::vector<Value> tags = header.objects("tags");
  if (indexes.size() != kinds.size()) header.fail("global_indexes", "must hold one index per change");
  if (keys.size() != kinds.size()) header.fail("keys", "must hold one key per change");
  if (tags.size() != kinds.size()) header.fail("tags", "must hold one tag per change");
  WatchBatch batch;
  batch.cursor = header.unsigned_integer("cursor");
  batch.resync = header.boolean("resync");
  batch.changes.reserve(kinds.size());
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (indexes[i] < -1 || indexes[i] > kMaxGlobalIndex) {
      header.fail("global_indexes", "holds " + std::to_string(indexes[i]) + ", not a global index");
    }
    Change& change = batch.changes.emplace_back();
    change.kind = parse_change_kind(header, kinds[i]);
    change.global_index = indexes[i];
    if (!keys[i].empty()) change.key = std::move(keys[i]);
    if (!tags[i].is_null()) change.tag = std::move(tags[i]);
  }
  return batch;
}

}  // namespace seqflow::transport::control
