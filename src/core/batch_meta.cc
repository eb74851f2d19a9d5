// BatchMeta's queries and the operations that cut one batch: selections,
// chunks, splits, reorder. Every column is cut alike; custom_meta moves as
// MessagePack bytes, never decoded.
#include "seqflow/batch_meta.h"

#include <algorithm>
#include <numeric>

#include "seqflow/error.h"

namespace seqflow {
namespace {

std::string int_list(std::span<const int64_t> values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

// The rows of `meta` at `positions` (checked), every column.
template <typename Positions>
BatchMeta rows_of(const BatchMeta& meta, const Positions& positions) {
  const size_t fields = meta.field_schema.size();
  BatchMeta out;
  out.field_schema = meta.field_schema;
  out.extra_info = meta.extra_info;
  out.global_indexes.reserve(positions.size());
  out.production_status.reserve(positions.size() * fields);
  if (!meta.generations.empty()) out.generations.reserve(positions.size());
  out.custom_meta.reserve(positions.size(), 0);
  for (const auto& [field, versions] : meta.versions) {
    std::vector<uint64_t>& picked = out.versions[field];
    picked.reserve(positions.size());
    for (const auto position : positions) picked.push_back(versions[static_cast<size_t>(position)]);
  }
  for (const auto position : positions) {
    const auto i = static_cast<size_t>(position);
    out.global_indexes.push_back(meta.global_indexes[i]);
    out.partition_ids.push_back(meta.partition_ids[i]);
    if (!meta.generations.empty()) out.generations.push_back(meta.generations[i]);
    for (size_t f = 0; f < fields; ++f) out.production_status.push_back(meta.produced(i, f));
    out.custom_meta.push_back_encoded(meta.custom_meta_of(i));
  }
  return out;
}

}  // namespace

std::vector<size_t> chunk_sizes(size_t total, int64_t parts) {
  if (parts < 1) throw_invalid("parts must be an integer >= 1, got " + std::to_string(parts));
  const auto count = static_cast<size_t>(parts);
  std::vector<size_t> out(count, total / count);
  for (size_t i = 0; i < total % count; ++i) ++out[i];
  return out;
}

std::vector<uint8_t> BatchMeta::ready() const {
  const size_t fields = field_schema.size();
  std::vector<uint8_t> out(size(), fields > 0);
  for (size_t i = 0; fields > 0 && i < out.size(); ++i) {
    for (size_t f = 0; f < fields && out[i]; ++f) out[i] = produced(i, f);
  }
  return out;
}

std::vector<uint8_t> BatchMeta::field_produced(std::span<const std::string> names) const {
  std::vector<uint8_t> out(size() * names.size(), 0);
  for (size_t j = 0; j < names.size(); ++j) {
    const auto found = field_schema.find(names[j]);
    if (found == field_schema.end()) continue;
    const auto column = static_cast<size_t>(std::distance(field_schema.begin(), found));
    for (size_t i = 0; i < size(); ++i) out[i * names.size() + j] = produced(i, column);
  }
  return out;
}

std::vector<std::string> BatchMeta::produced_fields() const {
  std::vector<std::string> out;
  size_t column = 0;
  for (const auto& [name, schema] : field_schema) {
    bool everywhere = true;
    for (size_t i = 0; i < size() && everywhere; ++i) everywhere = produced(i, column);
    if (everywhere) out.push_back(name);
    ++column;
  }
  return out;
}

BatchMeta BatchMeta::select_samples(std::span<const int64_t> positions) const {
  for (const int64_t position : positions) {
    if (position < 0 || static_cast<size_t>(position) >= size()) {
      throw_invalid("sample_indices must lie in [0, " + std::to_string(size()) + "), got " + int_list(positions));
    }
  }
  return rows_of(*this, positions);
}

BatchMeta BatchMeta::slice(size_t begin, size_t end) const {
  if (begin > end || end > size()) {
    throw_invalid("slice [" + std::to_string(begin) + ", " + std::to_string(end) + ") must lie in [0, " +
                  std::to_string(size()) + "]");
  }
  std::vector<size_t> positions(end - begin);
  std::iota(positions.begin(), positions.end(), begin);
  return rows_of(*this, positions);
}

BatchMeta BatchMeta::select_fields(std::span<const std::string> names) const {
  BatchMeta out;
  out.global_indexes = global_indexes;
  out.partition_ids = partition_ids;
  out.generations = generations;
  out.custom_meta = custom_meta;
  out.extra_info = extra_info;
  for (const std::string& name : names) {
    const auto found = field_schema.find(name);
    if (found == field_schema.end()) continue;
    out.field_schema.insert(*found);
    const auto written = versions.find(name);
    if (written != versions.end()) out.versions.insert(*written);
  }
  std::vector<std::string> kept;
  for (const auto& entry : out.field_schema) kept.push_back(entry.first);
  out.production_status = field_produced(kept);
  return out;
}

std::vector<BatchMeta> BatchMeta::chunk(int64_t chunks) const {
  if (chunks < 1) throw_invalid("chunks must be an integer >= 1, got " + std::to_string(chunks));
  const std::vector<size_t> sizes = chunk_sizes(size(), chunks);
  std::vector<BatchMeta> out;
  size_t begin = 0;
  for (const size_t part : sizes) {
    out.push_back(slice(begin, begin + part));
    begin += part;
  }
  return out;
}

std::vector<BatchMeta> BatchMeta::split(std::span<const int64_t> sizes) const {
  const bool negative = std::any_of(sizes.begin(), sizes.end(), [](int64_t s) { return s < 0; });
  if (negative || std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != static_cast<int64_t>(size())) {
    throw_invalid("sizes " + int_list(sizes) + " must be >= 0 and add up to " + std::to_string(size()));
  }
  std::vector<BatchMeta> out;
  size_t begin = 0;
  for (const int64_t part : sizes) {
    out.push_back(slice(begin, begin + static_cast<size_t>(part)));
    begin += static_cast<size_t>(part);
  }
  return out;
}

std::vector<std::vector<int64_t>> BatchMeta::partition_positions() const {
  std::vector<std::vector<int64_t>> out;
  std::map<std::string, size_t> part_of;
  for (size_t i = 0; i < size(); ++i) {
    const auto [at, added] = part_of.try_emplace(partition_ids[i], out.size());
    if (added) out.emplace_back();
    out[at->second].push_back(static_cast<int64_t>(i));
  }
  return out;
}

std::vector<BatchMeta> BatchMeta::chunk_by_partition() const {
  std::vector<BatchMeta> out;
  for (const std::vector<int64_t>& positions : partition_positions()) out.push_back(rows_of(*this, positions));
  return out;
}

void BatchMeta::reorder(std::span<const int64_t> positions) {
  if (positions.size() != size()) {
    throw_invalid("Indices length " + std::to_string(positions.size()) + " mismatch batch size " +
                  std::to_string(size()));
  }
  std::vector<uint8_t> seen(size(), 0);
  for (const int64_t position : positions) {
    if (position >= 0 && static_cast<size_t>(position) < size() && seen[static_cast<size_t>(position)]++) {
      throw_invalid("Indices contain duplicates: " + int_list(positions));
    }
  }
  *this = select_samples(positions);
}

}  // namespace seqflow
