// ControlPlane::kv_list's answer for one partition: its keys, in the order
// they were made, each with its tag (its sample's custom_meta, still
// MessagePack). Keys lie back to back in one buffer, as the tags do: a
// listing of 100k keys costs two allocations, not one string per key, and a
// received listing is read where the reply's frame holds it, not copied.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "seqflow/value.h"

namespace seqflow {

// Which state of a partition's keys and tags a listing shows: the epoch is
// drawn at random when the partition is made (again after a clear, a
// checkpoint load or a restart), the count grows with every change. Equal
// versions, equal listings: a client that holds one is told "unchanged".
struct ListingVersion {
  uint64_t epoch = 0;
  uint64_t changes = 0;
  bool operator==(const ListingVersion&) const = default;
};

class PartitionKeys {
 public:
  PartitionKeys() = default;
  explicit PartitionKeys(std::string partition_id) : partition_id_(std::move(partition_id)) {}
  // Bytes received, not copied: `owner` keeps them alive. The offsets (one
  // per key plus one, from 0 ascending to the bytes' size) are checked here,
  // kInvalidArgument naming the problem; a tag is checked when it is decoded.
  static PartitionKeys over(std::string partition_id, std::shared_ptr<const void> owner, std::string_view key_bytes,
                            std::vector<uint32_t> key_offsets, std::string_view tag_bytes,
                            std::vector<uint32_t> tag_offsets);

  const std::string& partition_id() const { return partition_id_; }
  const ListingVersion& version() const { return version_; }
  void set_version(const ListingVersion& version) { version_ = version; }
  // An answer without keys: the asker's listing of this version holds.
  static PartitionKeys unchanged(std::string partition_id, const ListingVersion& version);
  bool is_unchanged() const { return unchanged_; }
  size_t size() const { return key_offsets_.size() - 1; }
  bool empty() const { return size() == 0; }
  std::string_view key(size_t i) const { return slice(key_bytes(), key_offsets_, i); }
  // Key i's tag: an object ({} when it has none). Throws kInvalidArgument
  // naming the key when its bytes are no MessagePack map.
  Value tag(size_t i) const;
  // Key i's tag as it travels: MessagePack bytes (empty for {}), unchecked
  // when received; decoders must check them.
  std::string_view encoded_tag(size_t i) const { return slice(tag_bytes(), tag_offsets_, i); }

  // A listing made here (not received): `encoded_tag` is trusted, the
  // controller's own encoding.
  void push_back(std::string_view key, std::string_view encoded_tag);
  void reserve(size_t keys, size_t key_bytes = 0, size_t tag_bytes = 0);

  std::string_view key_bytes() const { return owner_ ? received_keys_ : std::string_view(own_keys_); }
  std::string_view tag_bytes() const { return owner_ ? received_tags_ : std::string_view(own_tags_); }
  const std::vector<uint32_t>& key_offsets() const { return key_offsets_; }
  const std::vector<uint32_t>& tag_offsets() const { return tag_offsets_; }

  bool operator==(const PartitionKeys& other) const;

 private:
  static std::string_view slice(std::string_view bytes, const std::vector<uint32_t>& offsets, size_t i) {
    return bytes.substr(offsets[i], offsets[i + 1] - offsets[i]);
  }

  std::string partition_id_;
  ListingVersion version_;
  bool unchanged_ = false;
  std::string own_keys_, own_tags_;    // a listing made here
  std::shared_ptr<const void> owner_;  // or a received one's bytes
  std::string_view received_keys_, received_tags_;
  std::vector<uint32_t> key_offsets_{0};
  std::vector<uint32_t> tag_offsets_{0};
};

}  // namespace seqflow
