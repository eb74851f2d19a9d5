#include "core/control_data_codec.h"

#include "core/custom_meta.h"
#include "core/field_schema_merge.h"
#include "seqflow/error.h"

namespace seqflow::core {
namespace {

using nlohmann::json;

// Far below 2^64: a loaded counter goes on (and jumps, see Controller::load)
// without wrapping.
constexpr uint64_t kMaxNextGeneration = uint64_t{1} << 63;

json encode_schema(const std::string& name, const FieldSchema& schema) {
  return {{"name", name},
          {"dtype", dtype_name(schema.dtype)},
          {"shape", schema.shape},
          {"is_nested", schema.is_nested},
          {"is_object", schema.is_object}};
}

json encode_partition(const ControlData& data, const PartitionState& partition) {
  json fields = json::array();
  for (uint32_t id = 0; id < partition.field_count(); ++id) {
    fields.push_back(encode_schema(partition.field_name(id), partition.schema(id)));
  }
  std::vector<int64_t> indexes;
  std::vector<uint64_t> generations;
  std::vector<uint32_t> put_ids, put_pos;
  std::vector<uint64_t> produced;
  json metas = json::array();
  for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
    indexes.push_back(partition.global_index(slot));
    generations.push_back(data.generation(indexes.back()));
    put_ids.push_back(partition.put_id(slot));
    put_pos.push_back(partition.put_pos(slot));
    auto words = partition.produced_words(slot);
    produced.insert(produced.end(), words.begin(), words.end());
    const std::string& bytes = partition.meta_bytes(slot);
    metas.push_back(json::binary(std::vector<uint8_t>(bytes.begin(), bytes.end())));
  }
  json tasks = json::object();
  for (const auto& [name, queue] : partition.tasks()) {
    std::vector<int64_t> consumed;
    for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
      if (queue.is_consumed(slot)) consumed.push_back(partition.global_index(slot));
    }
    tasks[name] = consumed;
  }
  json keys = json::array();
  for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
    if (const std::string* key = partition.key_of(slot))
      keys.push_back(json::array({*key, partition.global_index(slot)}));
  }
  // Write versions, per sample in the order above: only fields overwritten.
  json field_versions = json::object();
  for (uint32_t id = 0; id < partition.field_count(); ++id) {
    if (!partition.field_has_versions(id)) continue;
    std::vector<uint64_t> versions;
    for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
      versions.push_back(partition.field_version(slot, id));
    }
    field_versions[partition.field_name(id)] = std::move(versions);
  }
  std::vector<uint64_t> meta_versions;
  bool tags_versioned = false;
  for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
    meta_versions.push_back(partition.meta_version(slot));
    tags_versioned = tags_versioned || meta_versions.back() != 0;
  }
  if (!tags_versioned) meta_versions.clear();
  return {{"field_versions", std::move(field_versions)},
          {"meta_versions", std::move(meta_versions)},
          {"name", partition.name()},
          {"fields", std::move(fields)},
          {"words_per_sample", partition.words_per_sample()},
          {"global_indexes", indexes},
          {"generations", generations},
          {"put_ids", put_ids},
          {"put_pos", put_pos},
          {"produced", produced},
          {"custom_meta", std::move(metas)},
          {"tasks", std::move(tasks)},
          {"keys", std::move(keys)}};
}

FieldSchema decode_schema(const json& entry) {
  FieldSchema schema;
  schema.dtype = parse_dtype(entry.at("dtype").get<std::string>());
  schema.shape = entry.at("shape").get<Shape>();
  schema.is_nested = entry.at("is_nested").get<bool>();
  schema.is_object = entry.at("is_object").get<bool>();
  return schema;
}

void decode_partition(ControlData& data, const json& encoded, uint64_t next_generation) {
  const auto name = encoded.at("name").get<std::string>();
  if (data.find(name) != nullptr) throw_invalid("partition '" + name + "' appears twice");
  PartitionState& partition = data.find_or_create(name);
  const std::string context = "partition '" + name + "': ";

  for (const json& entry : encoded.at("fields")) {
    const auto field = entry.at("name").get<std::string>();
    const FieldSchema schema = decode_schema(entry);
    check_schema(field, schema);
    if (partition.field_id(field)) throw_invalid(context + "field '" + field + "' appears twice");
    partition.set_field(field, schema);
  }
  const auto words = encoded.at("words_per_sample").get<size_t>();
  if (words != partition.words_per_sample()) {
    throw_invalid(context + "words_per_sample " + std::to_string(words) + " does not fit " +
                  std::to_string(partition.field_count()) + " fields");
  }
  const auto indexes = encoded.at("global_indexes").get<std::vector<int64_t>>();
  // Checkpoints written before generations have none: their samples get new ones.
  std::optional<std::vector<uint64_t>> generations;
  if (encoded.contains("generations")) generations = encoded.at("generations").get<std::vector<uint64_t>>();
  const auto put_ids = encoded.at("put_ids").get<std::vector<uint32_t>>();
  const auto put_pos = encoded.at("put_pos").get<std::vector<uint32_t>>();
  const auto produced = encoded.at("produced").get<std::vector<uint64_t>>();
  const json& metas = encoded.at("custom_meta");
  const size_t n = indexes.size();
  if (put_ids.size() != n || put_pos.size() != n || produced.size() != n * words || metas.size() != n ||
      (generations && generations->size() != n)) {
    throw_invalid(context + "sample columns differ in length");
  }
  // Bits of fields that do not exist would make phantom fields ready.
  FieldMask valid(words, 0);
  for (uint32_t id = 0; id < partition.field_count(); ++id) valid[id / 64] |= uint64_t{1} << (id % 64);
  // Checkpoints written before write versions have none: every value is its first write.
  std::vector<std::pair<uint32_t, std::vector<uint64_t>>> field_versions;
  if (encoded.contains("field_versions")) {
    for (const auto& [field, versions] : encoded.at("field_versions").items()) {
      const auto id = partition.field_id(field);
      if (!id) throw_invalid(context + "write versions of unknown field '" + field + "'");
      field_versions.emplace_back(*id, versions.get<std::vector<uint64_t>>());
      if (field_versions.back().second.size() != n) throw_invalid(context + "sample columns differ in length");
    }
  }
  std::vector<uint64_t> meta_versions;  // empty: no tags of a versioned write
  if (encoded.contains("meta_versions")) meta_versions = encoded.at("meta_versions").get<std::vector<uint64_t>>();
  if (!meta_versions.empty() && meta_versions.size() != n) {
    throw_invalid(context + "sample columns differ in length");
  }
  std::vector<uint64_t> bits(words);
  for (size_t i = 0; i < n; ++i) {
    uint32_t slot = 0;
    std::optional<uint64_t> generation;
    if (generations) {
      generation = (*generations)[i];
      if (*generation == 0 || *generation >= next_generation) {
        throw_invalid(context + "global index " + std::to_string(indexes[i]) + " has generation " +
                      std::to_string(*generation) + ", outside [1, next_generation " + std::to_string(next_generation) +
                      ")");
      }
    }
    if (!data.restore_sample(partition, indexes[i], generation, put_ids[i], put_pos[i], &slot)) {
      throw_invalid(context + "global index " + std::to_string(indexes[i]) + " is negative or not unique");
    }
    for (size_t w = 0; w < words; ++w) bits[w] = produced[i * words + w] & valid[w];
    partition.set_produced_words(slot, bits);
    for (const auto& [id, versions] : field_versions) partition.set_field_version(slot, id, versions[i]);
    if (!meta_versions.empty()) partition.set_meta_version(slot, meta_versions[i]);
    const auto& bytes = metas[i].get_binary();
    if (!bytes.empty()) {
      const std::string where = context + "custom_meta of global index " + std::to_string(indexes[i]);
      const Value meta = decode_meta(std::string(bytes.begin(), bytes.end()));
      partition.set_meta(slot, encode_meta(meta, where));
    }
  }
  for (const auto& [task, consumed] : encoded.at("tasks").items()) {
    TaskQueue& queue = partition.task(task);
    for (const json& value : consumed) {
      const auto index = value.get<int64_t>();
      auto slot = data.slot_of(partition, index);
      if (!slot || queue.is_consumed(*slot)) {
        throw_invalid(context + "task '" + task + "' consumed global index " + std::to_string(index) +
                      ", which is unknown or listed twice");
      }
      queue.consume(*slot);
    }
  }
  for (const json& entry : encoded.at("keys")) {
    const auto key = entry.at(0).get<std::string>();
    const auto index = entry.at(1).get<int64_t>();
    auto slot = data.slot_of(partition, index);
    if (key.empty() || !slot || partition.key_slot(key)) {
      throw_invalid(context + "key '" + key + "' names unknown global index " + std::to_string(index) +
                    " or appears twice");
    }
    partition.set_key(key, *slot);
  }
}

}  // namespace

json encode_control_data(const ControlData& data) {
  json partitions = json::array();
  // Decoding creates them in this order, so the restored ones keep it.
  for (const PartitionState* partition : data.in_creation_order()) {
    partitions.push_back(encode_partition(data, *partition));
  }
  return {{"partitions", std::move(partitions)},
          {"next_generation", data.indexes().next_generation()},
          {"incarnation", data.incarnation()}};
}

ControlData decode_control_data(const json& encoded) {
  ControlData data;
  // Without (a checkpoint from before generations): the fresh data's own.
  uint64_t next_generation = data.indexes().next_generation();
  if (encoded.contains("next_generation")) {
    next_generation = encoded.at("next_generation").get<uint64_t>();
    if (next_generation == 0 || next_generation > kMaxNextGeneration) {
      throw_invalid("next_generation " + std::to_string(next_generation) + " is outside [1, " +
                    std::to_string(kMaxNextGeneration) + "]");
    }
    data.set_next_generation(next_generation);
  }
  if (encoded.contains("incarnation")) {
    const auto incarnation = encoded.at("incarnation").get<uint64_t>();
    if (incarnation == 0) throw_invalid("incarnation must not be 0");
    data.set_incarnation(incarnation);
  }
  for (const json& partition : encoded.at("partitions")) decode_partition(data, partition, next_generation);
  return data;
}

}  // namespace seqflow::core
