#include "core/meta_update.h"

#include <string>
#include <unordered_map>

#include "seqflow/error.h"

namespace seqflow::core {

std::vector<EncodedMeta> encode_updates(std::span<const int64_t> global_indexes, std::span<const Value> custom_meta) {
  if (custom_meta.size() != global_indexes.size()) {
    throw_invalid("custom_meta has " + std::to_string(custom_meta.size()) + " entries for " +
                  std::to_string(global_indexes.size()) + " samples");
  }
  std::vector<EncodedMeta> out;
  out.reserve(custom_meta.size());
  for (size_t i = 0; i < custom_meta.size(); ++i) {
    out.push_back(encode_meta(custom_meta[i], custom_meta_where(i, global_indexes[i])));
  }
  return out;
}

std::vector<std::pair<uint32_t, EncodedMeta>> prepare_meta(const PartitionState& partition,
                                                           std::span<const uint32_t> slots,
                                                           std::span<const int64_t> global_indexes,
                                                           std::span<const Value> custom_meta,
                                                           std::vector<EncodedMeta> updates) {
  std::vector<std::pair<uint32_t, EncodedMeta>> out;
  out.reserve(slots.size());
  std::unordered_map<uint32_t, size_t> position;  // slot -> entry of out
  for (size_t i = 0; i < slots.size(); ++i) {
    auto [it, first] = position.emplace(slots[i], out.size());
    if (first && partition.meta_bytes(slots[i]).empty()) {
      out.emplace_back(slots[i], std::move(updates[i]));  // nothing to merge with
      continue;
    }
    Value merged = decode_meta(first ? partition.meta_bytes(slots[i]) : out[it->second].second.bytes);
    merged = merge_meta(std::move(merged), custom_meta[i]);
    // Both sides were checked key by key, so this cannot fail on the values.
    EncodedMeta encoded = encode_meta(merged, "custom_meta of global index " + std::to_string(global_indexes[i]));
    if (first) {
      out.emplace_back(slots[i], std::move(encoded));
    } else {
      out[it->second].second = std::move(encoded);
    }
  }
  return out;
}

}  // namespace seqflow::core
