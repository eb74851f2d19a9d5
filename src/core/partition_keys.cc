#include "seqflow/partition_keys.h"

#include <limits>

#include "seqflow/error.h"

namespace seqflow {

void PartitionKeys::push_back(std::string_view key, std::string_view encoded_tag) {
  if (key_bytes_.size() + key.size() > std::numeric_limits<uint32_t>::max()) {
    throw_invalid("the keys of partition '" + partition_id_ + "' exceed 4 GiB");
  }
  tags_.push_back_encoded(encoded_tag);
  key_bytes_.append(key);
  key_offsets_.push_back(static_cast<uint32_t>(key_bytes_.size()));
}

void PartitionKeys::reserve(size_t keys, size_t key_bytes, size_t tag_bytes) {
  key_offsets_.reserve(keys + 1);
  key_bytes_.reserve(key_bytes);
  tags_.reserve(keys, tag_bytes);
}

}  // namespace seqflow
