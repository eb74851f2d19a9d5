#include "seqflow/custom_meta_list.h"

#include <limits>

#include "common/msgpack_reader.h"
#include "common/msgpack_writer.h"
#include "core/custom_meta.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

void check_size(size_t bytes) {
  if (bytes > std::numeric_limits<uint32_t>::max()) {
    throw_invalid("custom_meta of one batch must stay under 4 GiB, got " + std::to_string(bytes) + " bytes");
  }
}

}  // namespace

void CustomMetaList::check_offsets(size_t byte_count, std::span<const uint32_t> offsets) {
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != byte_count) {
    throw_invalid("custom_meta offsets must start at 0 and end at the byte count " + std::to_string(byte_count));
  }
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1]) {
      throw_invalid("custom_meta offsets must ascend, entry " + std::to_string(i) + " is " +
                    std::to_string(offsets[i]));
    }
  }
}

CustomMetaList CustomMetaList::from_encoded(std::string bytes, std::vector<uint32_t> offsets) {
  check_offsets(bytes.size(), offsets);
  CustomMetaList out;
  out.bytes_ = std::move(bytes);
  out.offsets_ = std::move(offsets);
  // Checked, not decoded: the bytes come from Python callers, and a deeply
  // nested entry must be an error here, not a stack overflow in a decoder.
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string_view entry = out.encoded(i);
    if (entry.empty()) continue;
    try {
      check_msgpack_map(entry, kMaxDecodeNesting);
    } catch (const Error& error) {
      throw_invalid("custom_meta[" + std::to_string(i) + "] " + error.what());
    }
  }
  return out;
}

Value CustomMetaList::operator[](size_t i) const { return core::decode_meta(encoded(i)); }

void CustomMetaList::push_back(const Value& object) {
  if (!object.is_object()) {
    throw_invalid("custom_meta[" + std::to_string(size()) + "] must be an object, got " +
                  std::string(object.type_name()));
  }
  if (object.empty()) {
    push_back_encoded({});
    return;
  }
  MsgpackWriter encoded;
  encoded.value(object);
  push_back_encoded(encoded.bytes());
}

void CustomMetaList::push_back_encoded(std::string_view bytes) {
  check_size(bytes_.size() + bytes.size());
  bytes_.append(bytes);
  offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
}

void CustomMetaList::reserve(size_t samples, size_t bytes) {
  offsets_.reserve(samples + 1);
  bytes_.reserve(bytes);
}

CustomMetaList CustomMetaList::merged(std::span<const Value> updates) const {
  if (updates.empty()) return *this;
  if (updates.size() != size()) {
    throw_invalid("custom_meta holds " + std::to_string(updates.size()) + " entries for " + std::to_string(size()) +
                  " samples");
  }
  CustomMetaList out;
  out.reserve(size(), bytes_.size());
  for (size_t i = 0; i < size(); ++i) {
    if (updates[i].empty()) {
      out.push_back_encoded(encoded(i));
      continue;
    }
    out.push_back(core::merge_meta((*this)[i], updates[i]));
  }
  return out;
}

}  // namespace seqflow
