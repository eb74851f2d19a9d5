// Per-sample custom metadata kept compact: MessagePack bytes per sample, with
// the two keys samplers read on every call (total_lengths, group_id) pulled
// out into columns. Decoded to JSON only for samples that are handed out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace seqflow::core {

struct EncodedMeta {
  std::string bytes;                  // empty for {}
  std::optional<int64_t> length;      // "total_lengths"
  std::optional<std::string> group;   // "group_id", as canonical JSON text
};

// Checks one sample's metadata and encodes it. `where` names the sample in
// errors ("custom_meta[3] (global index 17)"). Throws kInvalidArgument when
// it is not an object, when total_lengths is not a non-negative integer, or
// when group_id is not a scalar.
EncodedMeta encode_meta(const nlohmann::json& meta, const std::string& where);

// custom_meta bytes from outside (Python's encoded batches, checkpoints) may
// nest containers at most this deep: the decoders and nlohmann's writers
// recurse per level. The wire allows less (net::wire::kMaxNesting).
inline constexpr size_t kMaxMetaNesting = 1000;

// Empty bytes decode to {}. Throws kInvalidArgument when `bytes` are not one
// MessagePack value nested at most kMaxMetaNesting deep.
nlohmann::json decode_meta(std::string_view bytes);

// `current` updated key by key with `update` (both objects).
nlohmann::json merge_meta(nlohmann::json current, const nlohmann::json& update);

}  // namespace seqflow::core
