#include "seqflow/partition_keys.h"

#include <algorithm>
#include <limits>

#include "core/custom_meta.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

void check_offsets(const std::string& partition_id, const char* what, std::string_view bytes,
                   const std::vector<uint32_t>& offsets, size_t count) {
  if (offsets.size() != count + 1 || offsets.front() != 0 || offsets.back() != bytes.size() ||
      !std::is_sorted(offsets.begin(), offsets.end())) {
    throw_invalid("kv_list of partition '" + partition_id + "': " + what + " offsets must be " +
                  std::to_string(count + 1) + ", ascending from 0 to the bytes' count " + std::to_string(bytes.size()));
  }
}

}  // namespace

PartitionKeys PartitionKeys::over(std::string partition_id, std::shared_ptr<const void> owner,
                                  std::string_view key_bytes, std::vector<uint32_t> key_offsets,
                                  std::string_view tag_bytes, std::vector<uint32_t> tag_offsets) {
  const size_t count = std::max<size_t>(key_offsets.size(), 1) - 1;
  check_offsets(partition_id, "key", key_bytes, key_offsets, count);
  check_offsets(partition_id, "tag", tag_bytes, tag_offsets, count);
  PartitionKeys out(std::move(partition_id));
  out.owner_ = owner ? std::move(owner) : std::make_shared<int>(0);  // a listing over static bytes
  out.received_keys_ = key_bytes;
  out.received_tags_ = tag_bytes;
  out.key_offsets_ = std::move(key_offsets);
  out.tag_offsets_ = std::move(tag_offsets);
  return out;
}

PartitionKeys PartitionKeys::unchanged(std::string partition_id, const ListingVersion& version) {
  PartitionKeys out(std::move(partition_id));
  out.version_ = version;
  out.unchanged_ = true;
  return out;
}

Value PartitionKeys::tag(size_t i) const {
  Value out;
  try {
    out = core::decode_meta(encoded_tag(i));
  } catch (const Error& error) {
    throw_invalid("tag of key '" + std::string(key(i)) + "' in partition '" + partition_id_ + "': " + error.what());
  }
  if (!out.is_object()) {
    throw_invalid("tag of key '" + std::string(key(i)) + "' in partition '" + partition_id_ +
                  "' is not a MessagePack map");
  }
  return out;
}

void PartitionKeys::push_back(std::string_view key, std::string_view encoded_tag) {
  if (owner_) throw Error(ErrorCode::kInternal, "a received kv_list cannot grow");
  constexpr size_t kMaxBytes = std::numeric_limits<uint32_t>::max();
  if (own_keys_.size() + key.size() > kMaxBytes || own_tags_.size() + encoded_tag.size() > kMaxBytes) {
    throw_invalid("kv_list of partition '" + partition_id_ + "' exceeds 4 GiB of keys or tags");
  }
  own_keys_.append(key);
  key_offsets_.push_back(static_cast<uint32_t>(own_keys_.size()));
  own_tags_.append(encoded_tag);
  tag_offsets_.push_back(static_cast<uint32_t>(own_tags_.size()));
}

void PartitionKeys::reserve(size_t keys, size_t key_bytes, size_t tag_bytes) {
  key_offsets_.reserve(keys + 1);
  tag_offsets_.reserve(keys + 1);
  own_keys_.reserve(key_bytes);
  own_tags_.reserve(tag_bytes);
}

bool PartitionKeys::operator==(const PartitionKeys& other) const {
  return partition_id_ == other.partition_id_ && version_ == other.version_ && unchanged_ == other.unchanged_ &&
         key_bytes() == other.key_bytes() && tag_bytes() == other.tag_bytes() && key_offsets_ == other.key_offsets_ &&
         tag_offsets_ == other.tag_offsets_;
}

}  // namespace seqflow
