// The custom metadata of a batch: one JSON object per sample, carried as
// MessagePack in one buffer and decoded only when a caller reads it. A fetch
// hands out hundreds of samples per call; decoding each into a JSON tree up
// front cost more than the rest of the fetch, and the bytes are what the
// wire and Python's lazy view need anyway.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqflow/value.h"

namespace seqflow {

class CustomMetaList {
 public:
  CustomMetaList() = default;
  // `count` empty objects.
  explicit CustomMetaList(size_t count) : offsets_(count + 1, 0) {}
  // From the wire: validates the offsets (check_offsets) and that each entry
  // is a MessagePack map (or empty for {}) nested at most
  // core::kMaxMetaNesting deep; throws kInvalidArgument naming the bad entry.
  static CustomMetaList from_encoded(std::string bytes, std::vector<uint32_t> offsets);
  // Throws kInvalidArgument unless `offsets` holds one entry per sample plus
  // one, starting at 0, ascending, ending at `byte_count`.
  static void check_offsets(size_t byte_count, std::span<const uint32_t> offsets);

  size_t size() const { return offsets_.size() - 1; }
  bool empty() const { return size() == 0; }

  // Sample i's object, decoded.
  Value operator[](size_t i) const;
  // Sample i's MessagePack bytes; empty for {}.
  std::string_view encoded(size_t i) const {
    return std::string_view(bytes_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
  }

  // Throws kInvalidArgument unless `object` is a JSON object.
  void push_back(const Value& object);
  // Trusted bytes (from the controller's own encoding).
  void push_back_encoded(std::string_view bytes);
  void reserve(size_t samples, size_t bytes);
  // Sample i's object updated key by key with updates[i], for every i
  // (updates holds size() objects, or none for a plain copy).
  CustomMetaList merged(std::span<const Value> updates) const;

  const std::string& bytes() const { return bytes_; }
  const std::vector<uint32_t>& offsets() const { return offsets_; }

  bool operator==(const CustomMetaList& other) const = default;

 private:
  std::string bytes_;
  std::vector<uint32_t> offsets_{0};
};

}  // namespace seqflow
