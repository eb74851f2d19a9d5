#include "core/custom_meta.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "common/msgpack_reader.h"
#include "common/msgpack_writer.h"
#include "seqflow/error.h"

namespace seqflow::core {
namespace {

std::optional<int64_t> extract_length(const Value& value, const std::string& where) {
  if (value.is_null()) return std::nullopt;
  if (value.type() == Value::Type::kInt) {
    const int64_t v = value.as_int();
    if (v >= 0) return v;
  } else if (value.type() == Value::Type::kDouble) {
    // Python callers sometimes pass 1834.0; accept whole numbers only.
    const double v = value.as_double();
    if (v >= 0 && v < 9.2e18 && std::floor(v) == v) return static_cast<int64_t>(v);
  }
  throw_invalid(where + ": total_lengths must be a non-negative integer, got " + value.dump());
}

}  // namespace

void check_meta_depth(const Value& meta, const std::string& where) {
  // Iterative: the point is to refuse values too deep to recurse through.
  std::vector<std::pair<const Value*, size_t>> pending{{&meta, 1}};
  while (!pending.empty()) {
    const auto [value, depth] = pending.back();
    pending.pop_back();
    if (depth > kMaxCustomMetaDepth) {
      throw_invalid(where + " nests containers deeper than " + std::to_string(kMaxCustomMetaDepth) +
                    " levels, the most custom_meta may");
    }
    if (value->is_array()) {
      for (const Value& child : value->as_array()) {
        if (child.is_structured()) pending.emplace_back(&child, depth + 1);
      }
    } else if (value->is_object()) {
      for (const auto& [key, child] : value->as_object()) {
        if (child.is_structured()) pending.emplace_back(&child, depth + 1);
      }
    }
  }
}

std::string custom_meta_where(size_t position, int64_t global_index) {
  return "custom_meta[" + std::to_string(position) + "] (global index " + std::to_string(global_index) + ")";
}

std::string tag_where(size_t position, const std::string& key) {
  return "tags[" + std::to_string(position) + "] (key '" + key + "')";
}

void check_meta_depths(std::span<const int64_t> global_indexes, std::span<const Value> custom_meta) {
  for (size_t i = 0; i < std::min(global_indexes.size(), custom_meta.size()); ++i) {
    check_meta_depth(custom_meta[i], custom_meta_where(i, global_indexes[i]));
  }
}

void check_tag_depths(std::span<const std::string> keys, std::span<const Value> tags) {
  for (size_t i = 0; i < std::min(keys.size(), tags.size()); ++i) check_meta_depth(tags[i], tag_where(i, keys[i]));
}

void check_tags(std::span<const std::string> keys, std::span<const Value> tags) {
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

EncodedMeta encode_meta(const Value& meta, const std::string& where) {
  if (!meta.is_object()) {
    throw_invalid(where + " must be a JSON object, got " + meta.dump());
  }
  check_meta_depth(meta, where);
  EncodedMeta out;
  if (meta.empty()) return out;
  if (const Value* length = meta.find("total_lengths")) out.length = extract_length(*length, where);
  if (const Value* group = meta.find("group_id"); group != nullptr && !group->is_null()) {
    if (group->is_structured()) {
      throw_invalid(where + ": group_id must be a scalar, got " + group->dump());
    }
    out.group = group->dump();
  }
  MsgpackWriter packed;
  packed.value(meta);
  out.bytes = std::move(packed).take();
  return out;
}

Value decode_meta(std::string_view bytes) {
  if (bytes.empty()) return Value::object();
  try {
    return msgpack_to_value(bytes, kMaxDecodeNesting);
  } catch (const Error& error) {
    throw_invalid(std::string("custom_meta ") + error.what());
  }
}

Value merge_meta(Value current, const Value& update) {
  Value::Object& members = current.as_object();
  for (const auto& [key, value] : update.as_object()) members.insert_or_assign(key, value);
  return current;
}

}  // namespace seqflow::core
