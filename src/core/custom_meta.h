// Per-sample custom metadata kept compact: MessagePack bytes per sample, with
// the two keys samplers read on every call (total_lengths, group_id) pulled
// out into columns. Decoded to JSON only for samples that are handed out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "seqflow/limits.h"
#include "seqflow/value.h"

namespace seqflow::core {

struct EncodedMeta {
  std::string bytes;                 // empty for {}
  std::optional<int64_t> length;     // "total_lengths"
  std::optional<std::string> group;  // "group_id", as compact JSON text
};

// Throws kInvalidArgument naming `where` when `meta` nests containers deeper
// than kMaxCustomMetaDepth ({"a": 1} is one level, {"a": [1]} two).
void check_meta_depth(const Value& meta, const std::string& where);

// How errors name user metadata: custom_meta[i] of a sample, tags[i] of a key.
std::string custom_meta_where(size_t position, int64_t global_index);
std::string tag_where(size_t position, const std::string& key);

// check_meta_depth of each entry, named as above (entries beyond the shorter
// list are left to the count checks). A remote client runs these before it
// sends, so it reports what an embedded one does, not the wire's limit.
void check_meta_depths(std::span<const int64_t> global_indexes, std::span<const Value> custom_meta);
void check_tag_depths(std::span<const std::string> keys, std::span<const Value> tags);

// Key-value tags: none, or one per key, each an object (checked as
// encode_meta checks it) or null (no tag). Throws kInvalidArgument naming
// the key, before anything changes: a put that fails leaves tags as they were.
void check_tags(std::span<const std::string> keys, std::span<const Value> tags);

// Checks one sample's metadata (check_meta_depth included) and encodes it. `where` names the sample in
// errors ("custom_meta[3] (global index 17)"). Throws kInvalidArgument when
// it is not an object, when total_lengths is not a non-negative integer, or
// when group_id is not a scalar.
EncodedMeta encode_meta(const Value& meta, const std::string& where);

// Empty bytes decode to {}. Throws kInvalidArgument when `bytes` are not one
// MessagePack value nested at most kMaxDecodeNesting deep.
Value decode_meta(std::string_view bytes);

// `current` updated key by key with `update` (both objects).
Value merge_meta(Value current, const Value& update);

}  // namespace seqflow::core
