#include "core/control_data_codec.h"

#include <optional>
#include <type_traits>
#include <utility>

#include "core/custom_meta.h"
#include "core/field_schema_merge.h"
#include "seqflow/error.h"

namespace seqflow::core {
namespace {

using Kind = MsgpackReader::Kind;

// Far below 2^64: a loaded counter goes on (and jumps, see Controller::load)
// without wrapping.
constexpr uint64_t kMaxNextGeneration = uint64_t{1} << 63;

template <typename T>
void write_integers(MsgpackWriter& out, const std::vector<T>& values) {
  out.array(values.size());
  for (const T value : values) {
    if constexpr (std::is_signed_v<T>) {
      out.integer(value);
    } else {
      out.unsigned_integer(value);
    }
  }
}

void write_schema(MsgpackWriter& out, const std::string& name, const FieldSchema& schema) {
  MsgpackMapWriter entry;
  entry.set("name").string(name);
  entry.set("dtype").string(dtype_name(schema.dtype));
  write_integers(entry.set("shape"), schema.shape);
  entry.set("is_nested").boolean(schema.is_nested);
  entry.set("is_object").boolean(schema.is_object);
  entry.write(out);
}

void write_partition(MsgpackWriter& out, const ControlData& data, const PartitionState& partition,
                     const FetchLeases& leases) {
  MsgpackMapWriter map;
  MsgpackWriter& fields = map.set("fields");
  fields.array(partition.field_count());
  for (uint32_t id = 0; id < partition.field_count(); ++id) {
    write_schema(fields, partition.field_name(id), partition.schema(id));
  }
  std::vector<int64_t> indexes;
  std::vector<uint64_t> generations;
  std::vector<uint32_t> put_ids, put_pos;
  std::vector<uint64_t> produced;
  std::vector<std::string_view> metas;
  for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
    indexes.push_back(partition.global_index(slot));
    generations.push_back(data.generation(indexes.back()));
    put_ids.push_back(partition.put_id(slot));
    put_pos.push_back(partition.put_pos(slot));
    auto words = partition.produced_words(slot);
    produced.insert(produced.end(), words.begin(), words.end());
    metas.push_back(partition.meta_bytes(slot));
  }
  MsgpackWriter& custom_meta = map.set("custom_meta");
  custom_meta.array(metas.size());
  for (const std::string_view bytes : metas) custom_meta.binary(std::as_bytes(std::span(bytes.data(), bytes.size())));
  MsgpackMapWriter tasks;
  for (const auto& [name, queue] : partition.tasks()) {
    std::vector<int64_t> consumed;
    const bool any_leased = leases.leased_samples(partition.name(), name) != 0;
    for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
      const int64_t index = partition.global_index(slot);
      if (queue.is_consumed(slot) &&
          !(any_leased && leases.holds(partition.name(), name, index, data.generation(index)))) {
        consumed.push_back(index);
      }
    }
    write_integers(tasks.set(name), consumed);
  }
  tasks.write(map.set("tasks"));
  std::vector<std::pair<const std::string*, int64_t>> keys;
  for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
    if (const std::string* key = partition.key_of(slot)) keys.emplace_back(key, partition.global_index(slot));
  }
  MsgpackWriter& key_list = map.set("keys");
  key_list.array(keys.size());
  for (const auto& [key, index] : keys) {
    key_list.array(2);
    key_list.string(*key);
    key_list.integer(index);
  }
  // Write versions, per sample in the order above: only fields overwritten.
  MsgpackMapWriter field_versions;
  for (uint32_t id = 0; id < partition.field_count(); ++id) {
    if (!partition.field_has_versions(id)) continue;
    std::vector<uint64_t> versions;
    for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
      versions.push_back(partition.field_version(slot, id));
    }
    write_integers(field_versions.set(partition.field_name(id)), versions);
  }
  field_versions.write(map.set("field_versions"));
  std::vector<uint64_t> meta_versions;
  bool tags_versioned = false;
  for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
    meta_versions.push_back(partition.meta_version(slot));
    tags_versioned = tags_versioned || meta_versions.back() != 0;
  }
  if (!tags_versioned) meta_versions.clear();
  write_integers(map.set("meta_versions"), meta_versions);
  // Policy versions, per sample in the order above: left out while every
  // sample has the defaults, as checkpoints from before them load.
  std::vector<int64_t> starts, finishes;
  bool any_versions = false;
  for (uint32_t slot = partition.first(); slot != kNoSlot; slot = partition.next(slot)) {
    const SampleVersions& versions = partition.versions(slot);
    starts.push_back(versions.start);
    finishes.push_back(versions.finish);
    any_versions = any_versions || versions.start != 0 || versions.finish != SampleVersions::kUnfinished;
  }
  if (any_versions) {
    write_integers(map.set("start_versions"), starts);
    write_integers(map.set("finish_versions"), finishes);
  }
  map.set("name").string(partition.name());
  map.set("words_per_sample").unsigned_integer(partition.words_per_sample());
  write_integers(map.set("global_indexes"), indexes);
  write_integers(map.set("generations"), generations);
  write_integers(map.set("put_ids"), put_ids);
  write_integers(map.set("put_pos"), put_pos);
  write_integers(map.set("produced"), produced);
  map.write(out);
}

// The array `bytes` (one value inside `depth` containers) of integers that
// fit in T; else fail(problem).
template <typename T, typename Fail>
std::vector<T> integers(std::string_view bytes, size_t depth, Fail&& fail) {
  const auto refuse = [&] {
    fail("must be an array of integers from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
         std::to_string(std::numeric_limits<T>::max()));
  };
  MsgpackReader reader(bytes, kMaxDecodeNesting);
  const MsgpackReader::Token array = reader.next(depth);
  if (array.kind != Kind::kArray) refuse();
  std::vector<T> out;
  out.reserve(array.number);
  for (uint64_t i = 0; i < array.number; ++i) {
    const MsgpackReader::Token item = reader.next(depth + 1);
    if (item.kind == Kind::kUnsigned && std::in_range<T>(item.number)) {
      out.push_back(static_cast<T>(item.number));
    } else if (item.kind == Kind::kSigned && std::in_range<T>(item.integer)) {
      out.push_back(static_cast<T>(item.integer));
    } else {
      refuse();
    }
  }
  return out;
}

template <typename T>
std::vector<T> integers_at(const EncodedMap& map, std::string_view key) {
  return integers<T>(map.value(key), map.depth() + 1, [&](const std::string& problem) { map.fail(key, problem); });
}

void read_partition(ControlData& data, const EncodedMap& encoded, uint64_t next_generation) {
  const std::string name = encoded.text("name");
  if (data.find(name) != nullptr) throw_invalid("partition '" + name + "' appears twice");
  PartitionState& partition = data.find_or_create(name);
  const std::string context = "partition '" + name + "': ";

  for (const std::string_view bytes : encoded.elements("fields", "must be an array of field schemas")) {
    const EncodedMap entry = EncodedMap::skipping_unknown(bytes, encoded.depth() + 2, context + "field schema",
                                                          {"name", "dtype", "shape", "is_nested", "is_object"});
    const std::string field = entry.text("name");
    FieldSchema schema;
    schema.dtype = parse_dtype(entry.text("dtype"));
    schema.shape = integers_at<int64_t>(entry, "shape");
    schema.is_nested = entry.boolean("is_nested");
    schema.is_object = entry.boolean("is_object");
    check_schema(field, schema);
    if (partition.field_id(field)) throw_invalid(context + "field '" + field + "' appears twice");
    partition.set_field(field, schema);
  }
  const int64_t words_given = encoded.integer("words_per_sample");
  const size_t words = partition.words_per_sample();
  if (words_given < 0 || static_cast<uint64_t>(words_given) != words) {
    throw_invalid(context + "words_per_sample " + std::to_string(words_given) + " does not fit " +
                  std::to_string(partition.field_count()) + " fields");
  }
  const auto indexes = integers_at<int64_t>(encoded, "global_indexes");
  // Checkpoints written before generations have none: their samples get new ones.
  std::optional<std::vector<uint64_t>> generations;
  if (encoded.has("generations")) generations = integers_at<uint64_t>(encoded, "generations");
  const auto put_ids = integers_at<uint32_t>(encoded, "put_ids");
  const auto put_pos = integers_at<uint32_t>(encoded, "put_pos");
  const auto produced = integers_at<uint64_t>(encoded, "produced");
  const std::vector<std::string_view> metas = encoded.elements("custom_meta", "must be an array of binaries");
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
  if (encoded.has("field_versions")) {
    for (const auto& [field, versions] : encoded.members("field_versions", "must be a map of field to versions")) {
      const auto id = partition.field_id(std::string(field));
      if (!id) throw_invalid(context + "write versions of unknown field '" + std::string(field) + "'");
      field_versions.emplace_back(*id, integers<uint64_t>(versions, encoded.depth() + 2, [&](const std::string& p) {
        encoded.fail("field_versions", "of field " + in_quotes(field) + " " + p);
      }));
      if (field_versions.back().second.size() != n) throw_invalid(context + "sample columns differ in length");
    }
  }
  std::vector<uint64_t> meta_versions;  // empty: no tags of a versioned write
  if (encoded.has("meta_versions")) meta_versions = integers_at<uint64_t>(encoded, "meta_versions");
  if (!meta_versions.empty() && meta_versions.size() != n) {
    throw_invalid(context + "sample columns differ in length");
  }
  // Checkpoints written before policy versions have none: 0 and unfinished.
  std::vector<int64_t> starts, finishes;
  if (encoded.has("start_versions") || encoded.has("finish_versions")) {
    starts = integers_at<int64_t>(encoded, "start_versions");
    finishes = integers_at<int64_t>(encoded, "finish_versions");
    if (starts.size() != n || finishes.size() != n) throw_invalid(context + "sample columns differ in length");
  }
  const int64_t policy_version = data.policy_version();
  for (size_t i = 0; i < starts.size(); ++i) {
    if (starts[i] < 0 || starts[i] > policy_version || finishes[i] < SampleVersions::kUnfinished ||
        finishes[i] > policy_version) {
      throw_invalid(context + "global index " + std::to_string(indexes[i]) + " has policy versions " +
                    std::to_string(starts[i]) + " to " + std::to_string(finishes[i]) + ", beyond policy_version " +
                    std::to_string(policy_version));
    }
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
    if (!starts.empty()) partition.set_versions(slot, SampleVersions{starts[i], finishes[i]});
    const MsgpackReader::Token meta = MsgpackReader(metas[i], kMaxDecodeNesting).next(encoded.depth() + 2);
    if (meta.kind != Kind::kBinary) encoded.fail("custom_meta", "must be an array of binaries");
    if (!meta.bytes.empty()) {
      const std::string where = context + "custom_meta of global index " + std::to_string(indexes[i]);
      partition.set_meta(slot, encode_meta(decode_meta(meta.bytes), where));
    }
  }
  for (const auto& [task, consumed] : encoded.members("tasks", "must be a map of task to global indexes")) {
    TaskQueue& queue = partition.task(std::string(task));
    const auto fail = [&](const std::string& problem) {
      encoded.fail("tasks", "of task " + in_quotes(task) + " " + problem);
    };
    for (const int64_t index : integers<int64_t>(consumed, encoded.depth() + 2, fail)) {
      auto slot = data.slot_of(partition, index);
      if (!slot || queue.is_consumed(*slot)) {
        throw_invalid(context + "task '" + std::string(task) + "' consumed global index " + std::to_string(index) +
                      ", which is unknown or listed twice");
      }
      queue.consume(*slot);
    }
  }
  for (const std::string_view entry : encoded.elements("keys", "must be an array of [key, global index] pairs")) {
    MsgpackReader reader(entry, kMaxDecodeNesting);
    const MsgpackReader::Token pair = reader.next(encoded.depth() + 2);
    const MsgpackReader::Token key =
        pair.kind == Kind::kArray && pair.number >= 2 ? reader.next(encoded.depth() + 3) : MsgpackReader::Token();
    const MsgpackReader::Token at =
        key.kind == Kind::kString ? reader.next(encoded.depth() + 3) : MsgpackReader::Token();
    if (at.kind != Kind::kSigned && (at.kind != Kind::kUnsigned || !std::in_range<int64_t>(at.number))) {
      encoded.fail("keys", "must be an array of [key, global index] pairs");
    }
    const int64_t index = at.kind == Kind::kSigned ? at.integer : static_cast<int64_t>(at.number);
    auto slot = data.slot_of(partition, index);
    if (key.bytes.empty() || !slot || partition.key_slot(std::string(key.bytes))) {
      throw_invalid(context + "key '" + std::string(key.bytes) + "' names unknown global index " +
                    std::to_string(index) + " or appears twice");
    }
    partition.set_key(std::string(key.bytes), *slot);
  }
}

}  // namespace

void write_control_data(MsgpackMapWriter& checkpoint, const ControlData& data, const FetchLeases& leases) {
  // Reading creates the partitions in this order, so the restored ones keep it.
  const std::vector<const PartitionState*> partitions = data.in_creation_order();
  MsgpackWriter& list = checkpoint.set("partitions");
  list.array(partitions.size());
  for (const PartitionState* partition : partitions) write_partition(list, data, *partition, leases);
  checkpoint.set("next_generation").unsigned_integer(data.indexes().next_generation());
  checkpoint.set("incarnation").unsigned_integer(data.incarnation());
  if (data.policy_version() != 0) checkpoint.set("policy_version").integer(data.policy_version());
}

ControlData read_control_data(const EncodedMap& checkpoint) {
  ControlData data;
  // Without (a checkpoint from before generations): the fresh data's own.
  uint64_t next_generation = data.indexes().next_generation();
  if (checkpoint.has("next_generation")) {
    next_generation = checkpoint.unsigned_integer("next_generation");
    if (next_generation == 0 || next_generation > kMaxNextGeneration) {
      throw_invalid("next_generation " + std::to_string(next_generation) + " is outside [1, " +
                    std::to_string(kMaxNextGeneration) + "]");
    }
    data.set_next_generation(next_generation);
  }
  if (checkpoint.has("incarnation")) {
    const uint64_t incarnation = checkpoint.unsigned_integer("incarnation");
    if (incarnation == 0) throw_invalid("incarnation must not be 0");
    data.set_incarnation(incarnation);
  }
  if (checkpoint.has("policy_version")) {  // none before policy versions: 0
    const int64_t version = checkpoint.integer("policy_version");
    check_policy_version(version);
    data.set_policy_version(version);
  }
  const std::vector<std::string_view> partitions = checkpoint.elements("partitions", "must be an array of partitions");
  for (size_t p = 0; p < partitions.size(); ++p) {
    const EncodedMap partition = EncodedMap::skipping_unknown(
        partitions[p], checkpoint.depth() + 2, "partition " + std::to_string(p),
        {"name", "fields", "words_per_sample", "global_indexes", "generations", "put_ids", "put_pos", "produced",
         "custom_meta", "tasks", "keys", "field_versions", "meta_versions", "start_versions", "finish_versions"});
    read_partition(data, partition, next_generation);
  }
  return data;
}

}  // namespace seqflow::core
