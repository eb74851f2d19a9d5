// ControlPlane::kv_list's answer for one partition: its keys, in the order
// they were made, each with its tag (its sample's custom_meta, still
// MessagePack). Keys lie back to back in one buffer, as the tags do: a
// listing of 100k keys costs two allocations, not one string per key, and
// goes to the wire or to Python without a JSON tree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "seqflow/custom_meta_list.h"

namespace seqflow {

class PartitionKeys {
 public:
  PartitionKeys() = default;
  explicit PartitionKeys(std::string partition_id) : partition_id_(std::move(partition_id)) {}
  const std::string& partition_id() const { return partition_id_; }
  size_t size() const { return key_offsets_.size() - 1; }
  bool empty() const { return size() == 0; }
  std::string_view key(size_t i) const {
    return std::string_view(key_bytes_).substr(key_offsets_[i], key_offsets_[i + 1] - key_offsets_[i]);
  }
  // Key i's tag, decoded; an empty object when it has none.
  nlohmann::json tag(size_t i) const { return tags_[i]; }
  std::string_view encoded_tag(size_t i) const { return tags_.encoded(i); }

  // `encoded_tag` is trusted: the controller's own encoding, or checked.
  void push_back(std::string_view key, std::string_view encoded_tag);
  void reserve(size_t keys, size_t key_bytes = 0, size_t tag_bytes = 0);

  const std::string& key_bytes() const { return key_bytes_; }
  const std::vector<uint32_t>& key_offsets() const { return key_offsets_; }
  const CustomMetaList& tags() const { return tags_; }

  bool operator==(const PartitionKeys& other) const = default;

 private:
  std::string partition_id_;
  std::string key_bytes_;
  std::vector<uint32_t> key_offsets_{0};
  CustomMetaList tags_;
};

}  // namespace seqflow
