#include "core/custom_meta.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "common/msgpack_reader.h"
#include "seqflow/error.h"

namespace seqflow::core {
namespace {

std::optional<int64_t> extract_length(const nlohmann::json& value, const std::string& where) {
  if (value.is_null()) return std::nullopt;
  if (value.is_number_unsigned()) {
    const auto v = value.get<uint64_t>();
    if (v <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(v);
  } else if (value.is_number_integer()) {
    const auto v = value.get<int64_t>();
    if (v >= 0) return v;
  } else if (value.is_number_float()) {
    // Python callers sometimes pass 1834.0; accept whole numbers only.
    const double v = value.get<double>();
    if (v >= 0 && v < 9.2e18 && std::floor(v) == v) return static_cast<int64_t>(v);
  }
  throw_invalid(where + ": total_lengths must be a non-negative integer, got " + value.dump());
}

}  // namespace

void check_meta_depth(const nlohmann::json& meta, const std::string& where) {
  // Iterative: the point is to refuse values too deep to recurse through.
  std::vector<std::pair<const nlohmann::json*, size_t>> pending{{&meta, 1}};
  while (!pending.empty()) {
    const auto [value, depth] = pending.back();
    pending.pop_back();
    if (depth > kMaxCustomMetaDepth) {
      throw_invalid(where + " nests containers deeper than " + std::to_string(kMaxCustomMetaDepth) +
                    " levels, the most custom_meta may");
    }
    for (const nlohmann::json& child : *value) {
      if (child.is_structured()) pending.emplace_back(&child, depth + 1);
    }
  }
}

std::string custom_meta_where(size_t position, int64_t global_index) {
  return "custom_meta[" + std::to_string(position) + "] (global index " + std::to_string(global_index) + ")";
}

std::string tag_where(size_t position, const std::string& key) {
  return "tags[" + std::to_string(position) + "] (key '" + key + "')";
}

void check_meta_depths(std::span<const int64_t> global_indexes, std::span<const nlohmann::json> custom_meta) {
  for (size_t i = 0; i < std::min(global_indexes.size(), custom_meta.size()); ++i) {
    check_meta_depth(custom_meta[i], custom_meta_where(i, global_indexes[i]));
  }
}

void check_tag_depths(std::span<const std::string> keys, std::span<const nlohmann::json> tags) {
  for (size_t i = 0; i < std::min(keys.size(), tags.size()); ++i) check_meta_depth(tags[i], tag_where(i, keys[i]));
}

void check_tags(std::span<const std::string> keys, std::span<const nlohmann::json> tags) {
  if (!tags.empty() && tags.size() != keys.size()) {
    throw_invalid("tags has " + std::to_string(tags.size()) + " entries for " + std::to_string(keys.size()) + " keys");
  }
  check_tag_depths(keys, tags);
  for (size_t i = 0; i < tags.size(); ++i) {
    if (tags[i].is_null()) continue;
    if (!tags[i].is_object()) {
      throw_invalid(tag_where(i, keys[i]) + " must be a JSON object or null, got " + tags[i].dump());
    }
    (void)encode_meta(tags[i], tag_where(i, keys[i]));
  }
}

EncodedMeta encode_meta(const nlohmann::json& meta, const std::string& where) {
  if (!meta.is_object()) {
    throw_invalid(where + " must be a JSON object, got " + meta.dump());
  }
  check_meta_depth(meta, where);
  EncodedMeta out;
  if (meta.empty()) return out;
  if (auto it = meta.find("total_lengths"); it != meta.end()) {
    out.length = extract_length(*it, where);
  }
  if (auto it = meta.find("group_id"); it != meta.end() && !it->is_null()) {
    if (it->is_structured()) {
      throw_invalid(where + ": group_id must be a scalar, got " + it->dump());
    }
    out.group = it->dump();
  }
  const std::vector<uint8_t> packed = nlohmann::json::to_msgpack(meta);
  out.bytes.assign(packed.begin(), packed.end());
  return out;
}

nlohmann::json decode_meta(std::string_view bytes) {
  if (bytes.empty()) return nlohmann::json::object();
  try {
    return msgpack_to_json(bytes, kMaxDecodeNesting);
  } catch (const Error& error) {
    throw_invalid(std::string("custom_meta ") + error.what());
  }
}

nlohmann::json merge_meta(nlohmann::json current, const nlohmann::json& update) {
  current.update(update);
  return current;
}

}  // namespace seqflow::core
