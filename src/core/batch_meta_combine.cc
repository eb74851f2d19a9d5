// BatchMeta's operations that join batches: concat (more samples) and union
// (more fields of the same samples).
#include <algorithm>
#include <set>

#include "core/custom_meta.h"
#include "seqflow/batch_meta.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

// Lists in Python's spelling, as the Python layer's messages always had them.
std::string name_list(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out + "]";
}

template <typename Int>
std::string int_list(const std::vector<Int>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

std::vector<std::string> names_of(const BatchMeta& meta) {
  std::vector<std::string> out;
  for (const auto& entry : meta.field_schema) out.push_back(entry.first);
  return out;
}

std::vector<std::string> difference(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::string dtype_label(const FieldSchema& schema) {
  return schema.is_object ? "None" : std::string(dtype_name(schema.dtype));
}

void check_same_fields(std::span<const BatchMeta* const> parts) {
  const std::vector<std::string> names = names_of(*parts[0]);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::vector<std::string> got = names_of(*parts[i]);
    if (got != names) {
      throw_invalid("BatchMeta.concat: field_names mismatch at chunk[" + std::to_string(i) + "]: expected " +
                    name_list(names) + ", got " + name_list(got) + " (extra " + name_list(difference(got, names)) +
                    ", missing " + name_list(difference(names, got)) + ")");
    }
  }
  for (const auto& [name, first] : parts[0]->field_schema) {
    for (size_t i = 1; i < parts.size(); ++i) {
      const std::string dtype = dtype_label(parts[i]->field_schema.at(name));
      if (dtype != dtype_label(first)) {
        throw_invalid("Field '" + name + "' dtype mismatch in concat: chunk[0]=" + dtype_label(first) + ", chunk[" +
                      std::to_string(i) + "]=" + dtype);
      }
    }
  }
}

// The first part's entry; nested when any part's is, its shape the parts'
// common_shape.
FieldSchema merged_schema(const std::string& name, std::span<const BatchMeta* const> parts) {
  FieldSchema out = parts[0]->field_schema.at(name);
  std::vector<Shape> shapes;
  for (const BatchMeta* part : parts) {
    const auto found = part->field_schema.find(name);
    if (found == part->field_schema.end()) continue;
    out.is_nested = out.is_nested || found->second.is_nested;
    shapes.push_back(found->second.shape);
  }
  out.shape = common_shape(shapes);
  return out;
}

void merge_extra_info(Value& into, const Value& from) {
  for (const auto& [key, value] : from.as_object()) {
    const Value* found = into.find(key);
    if (found == nullptr) {
      into[key] = value;
    } else if (*found != value) {
      throw_invalid("BatchMeta.concat: extra_info key '" + key +
                    "' has conflicting values across chunks: " + found->dump() + " and " + value.dump());
    }
  }
}

}  // namespace

Shape common_shape(std::span<const Shape> shapes) {
  if (shapes.empty()) throw_invalid("common_shape needs at least one shape");
  Shape out = shapes[0];
  for (const Shape& shape : shapes) {
    if (shape.size() != out.size()) {
      out.assign(std::max(shape.size(), out.size()), -1);
      continue;
    }
    for (size_t d = 0; d < out.size(); ++d) {
      if (shape[d] != out[d]) out[d] = -1;
    }
  }
  return out;
}

BatchMeta BatchMeta::concat(std::span<const BatchMeta* const> all_parts, bool validate) {
  std::vector<const BatchMeta*> parts;
  for (const BatchMeta* part : all_parts) {
    if (part != nullptr && part->size() > 0) parts.push_back(part);
  }
  if (parts.empty()) return {};
  if (validate) check_same_fields(parts);
  const std::vector<std::string> names = names_of(*parts[0]);
  const bool with_generations =
      std::any_of(parts.begin(), parts.end(), [](const BatchMeta* p) { return !p->generations.empty(); });
  BatchMeta out;
  for (const std::string& name : names) out.field_schema.emplace(name, merged_schema(name, parts));
  size_t samples = 0, bytes = 0;
  for (const BatchMeta* part : parts) {
    samples += part->size();
    bytes += part->custom_meta.bytes().size();
  }
  out.global_indexes.reserve(samples);
  out.production_status.reserve(samples * names.size());
  out.custom_meta.reserve(samples, bytes);
  for (const BatchMeta* part : parts) {
    out.global_indexes.insert(out.global_indexes.end(), part->global_indexes.begin(), part->global_indexes.end());
    for (size_t r = 0, begin = 0; r < part->partition_ids.run_count(); begin = part->partition_ids.run_end(r++)) {
      out.partition_ids.append(part->partition_ids.run_end(r) - begin, part->partition_ids.run_name(r));
    }
    // 0 where a part has none: those samples are checked by partition only.
    if (with_generations) {
      if (part->generations.empty()) {
        out.generations.resize(out.generations.size() + part->size(), 0);
      } else {
        out.generations.insert(out.generations.end(), part->generations.begin(), part->generations.end());
      }
    }
    const std::vector<uint8_t> produced = part->field_produced(names);
    out.production_status.insert(out.production_status.end(), produced.begin(), produced.end());
    for (size_t i = 0; i < part->size(); ++i) out.custom_meta.push_back_encoded(part->custom_meta_of(i));
    merge_extra_info(out.extra_info, part->extra_info);
  }
  // 0 (the committed value) where a part never overwrote the field.
  for (const std::string& name : names) {
    const bool written =
        std::any_of(parts.begin(), parts.end(), [&](const BatchMeta* p) { return p->versions.contains(name); });
    if (!written) continue;
    std::vector<uint64_t>& joined = out.versions[name];
    joined.reserve(samples);
    for (const BatchMeta* part : parts) {
      const auto found = part->versions.find(name);
      if (found == part->versions.end()) {
        joined.resize(joined.size() + part->size(), 0);
      } else {
        joined.insert(joined.end(), found->second.begin(), found->second.end());
      }
    }
  }
  return out;
}

BatchMeta BatchMeta::union_with(const BatchMeta& other) const {
  if (other.size() == 0) return *this;
  if (size() == 0) return other;
  if (global_indexes != other.global_indexes) {
    throw_invalid("BatchMeta.union: global_indexes do not match: self.global_indexes=" + int_list(global_indexes) +
                  ", other.global_indexes=" + int_list(other.global_indexes));
  }
  if (!(partition_ids == other.partition_ids)) {
    throw_invalid(
        "BatchMeta.union: partition_ids do not match: self.partition_ids=" + name_list(partition_ids.to_vector()) +
        ", other.partition_ids=" + name_list(other.partition_ids.to_vector()));
  }
  if (!generations.empty() && !other.generations.empty() && generations != other.generations) {
    throw_invalid("BatchMeta.union: generations do not match (one side is stale): self.generations=" +
                  int_list(generations) + ", other.generations=" + int_list(other.generations));
  }
  BatchMeta out;
  out.global_indexes = global_indexes;
  out.partition_ids = partition_ids;
  out.generations = generations.empty() ? other.generations : generations;
  out.field_schema = field_schema;
  for (const auto& [name, entry] : other.field_schema) out.field_schema.insert_or_assign(name, entry);
  const std::vector<std::string> names = names_of(out);
  const std::vector<uint8_t> mine = field_produced(names), theirs = other.field_produced(names);
  out.production_status.resize(size() * names.size());
  for (size_t j = 0; j < names.size(); ++j) {
    const bool from_other = other.field_schema.contains(names[j]);
    for (size_t i = 0; i < size(); ++i) {
      const size_t at = i * names.size() + j;
      out.production_status[at] = from_other ? theirs[at] : mine[at];
    }
    const FieldVersions& side = from_other ? other.versions : versions;
    const auto written = side.find(names[j]);
    if (written != side.end()) out.versions.insert(*written);
  }
  std::vector<Value> updates;
  updates.reserve(size());
  for (size_t i = 0; i < size(); ++i) updates.push_back(core::decode_meta(other.custom_meta_of(i)));
  out.custom_meta = (custom_meta.empty() ? CustomMetaList(size()) : custom_meta).merged(updates);
  out.extra_info = core::merge_meta(extra_info, other.extra_info);
  return out;
}

}  // namespace seqflow
