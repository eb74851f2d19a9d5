#include "transport/wire_codec.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "common/msgpack_reader.h"
#include "common/msgpack_writer.h"
#include "common/value_json.h"
#include "seqflow/error.h"
#include "common/aligned_buffer.h"
#include "storage/value_check.h"

namespace seqflow::transport::wire {
namespace {

using Kind = MsgpackReader::Kind;

std::string in_quotes(std::string_view text) { return "'" + std::string(text) + "'"; }

// nlohmann's names, so that a message reads the same whichever decoder wrote it.
const char* type_name(Kind kind) {
  switch (kind) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return "boolean";
    case Kind::kUnsigned:
    case Kind::kSigned:
    case Kind::kFloat:
      return "number";
    case Kind::kString:
      return "string";
    case Kind::kBinary:
      return "binary";
    case Kind::kArray:
      return "array";
    case Kind::kMap:
      return "object";
  }
  return "unknown";
}

// A map read in place from MessagePack that has been checked whole (so
// reading it meets no malformed bytes): where each allowed key's value lies,
// decoded when asked for, with Header's checks and messages. Nothing is
// allocated unless a check fails (a reply holds a map per field schema).
class EncodedMap {
 public:
  static constexpr size_t kMaxFields = 11;

  // The map is `bytes`, inside `depth` containers; errors name it `what`,
  // or "<what> schema of '<schema_of>'" for a field schema. `allowed` holds
  // at most kMaxFields keys.
  EncodedMap(std::string_view bytes, size_t depth, std::string_view what,
             std::initializer_list<std::string_view> allowed, std::string_view schema_of = {})
      : depth_(depth), what_(what), schema_of_(schema_of) {
    MsgpackReader reader(bytes, kMaxDecodeNesting);
    const MsgpackReader::Token map = reader.next(depth);
    if (map.kind != Kind::kMap) throw_invalid(name() + " must be a map, got " + type_name(map.kind));
    for (std::string_view key : allowed) fields_.at(field_count_++) = Field{key, {}};
    const auto fields_end = fields_.begin() + static_cast<std::ptrdiff_t>(field_count_);
    for (uint64_t i = 0; i < map.number; ++i) {
      const std::string_view key = reader.key();
      const auto field = std::find_if(fields_.begin(), fields_end, [&](const Field& f) { return f.key == key; });
      if (field == fields_end) throw_invalid(name() + " has an unknown field " + in_quotes(key));
      const size_t start = reader.position();
      reader.skip(depth + 1);
      field->value = bytes.substr(start, reader.position() - start);  // a repeated key: the last one wins
    }
  }

  std::string text(std::string_view key) const {
    const MsgpackReader::Token token = first_token(key);
    if (token.kind != Kind::kString) fail(key, std::string("must be a string, got ") + type_name(token.kind));
    return std::string(token.bytes);
  }

  int64_t integer(std::string_view key) const {
    const MsgpackReader::Token token = first_token(key);
    if (token.kind == Kind::kSigned) return token.integer;
    if (token.kind != Kind::kUnsigned) {
      fail(key, std::string("must be an integer, got ") + type_name(token.kind));
    }
    if (token.number > uint64_t(std::numeric_limits<int64_t>::max())) fail(key, "is out of range");
    return static_cast<int64_t>(token.number);
  }

  bool boolean(std::string_view key) const {
    const MsgpackReader::Token token = first_token(key);
    if (token.kind != Kind::kBool) fail(key, std::string("must be a boolean, got ") + type_name(token.kind));
    return token.number != 0;
  }

  std::vector<std::string> texts(std::string_view key) const {
    MsgpackReader reader(value(key), kMaxDecodeNesting);
    const MsgpackReader::Token array = reader.next(depth_ + 1);
    if (array.kind != Kind::kArray) fail(key, "must be an array of strings");
    std::vector<std::string> out;
    out.reserve(array.number);
    for (uint64_t i = 0; i < array.number; ++i) {
      const MsgpackReader::Token item = reader.next(depth_ + 2);
      if (item.kind != Kind::kString) fail(key, "must be an array of strings");
      out.emplace_back(item.bytes);
    }
    return out;
  }

  std::string_view binary(std::string_view key) const {
    const MsgpackReader::Token token = first_token(key);
    if (token.kind != Kind::kBinary) fail(key, "must be a binary array");
    return token.bytes;
  }

  template <typename T>
  std::vector<T> numbers(std::string_view key) const {
    const std::string_view bytes = binary(key);
    if (bytes.size() % sizeof(T) != 0) fail(key, "holds a partial element");
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }

  Value decoded(std::string_view key) const {
    MsgpackReader reader(value(key), kMaxDecodeNesting);
    return read_value(reader, depth_ + 1);
  }

  bool has(std::string_view key) const {
    for (size_t i = 0; i < field_count_; ++i) {
      if (fields_[i].key == key) return !fields_[i].value.empty();
    }
    return false;
  }

  // The bytes of the value of `key`, one value inside depth() + 1 containers.
  std::string_view value(std::string_view key) const {
    for (size_t i = 0; i < field_count_; ++i) {
      if (fields_[i].key == key && !fields_[i].value.empty()) return fields_[i].value;
    }
    throw_invalid(name() + " lacks the field " + in_quotes(key));
  }
  size_t depth() const { return depth_; }

  [[noreturn]] void fail(std::string_view key, std::string_view problem) const {
    throw_invalid(name() + " field " + in_quotes(key) + " " + std::string(problem));
  }

 private:
  struct Field {
    std::string_view key;
    std::string_view value;  // empty: absent (a value takes a byte at least)
  };

  // The value's first token: a scalar, or a container's count.
  MsgpackReader::Token first_token(std::string_view key) const {
    MsgpackReader reader(value(key), kMaxDecodeNesting);
    return reader.next(depth_ + 1);
  }

  std::string name() const {
    return schema_of_.empty() ? std::string(what_) : std::string(what_) + " schema of " + in_quotes(schema_of_);
  }

  size_t depth_;
  std::string_view what_;
  std::string_view schema_of_;
  std::array<Field, kMaxFields> fields_;
  size_t field_count_ = 0;
};

// frames[index], which must be there.
std::string_view header_bytes(const Frames& frames, size_t index, std::string_view what) {
  if (index >= frames.size()) {
    throw_invalid(std::string(what) + " needs a header frame at position " + std::to_string(index) + ", got " +
                  std::to_string(frames.size()) + " frames");
  }
  return as_string_view(frames[index]);
}

// A header frame's bytes as a map, checked whole first: malformed
// MessagePack is named as read_header names it.
EncodedMap encoded_header(std::string_view bytes, std::string_view what,
                          std::initializer_list<std::string_view> allowed) {
  Kind kind = Kind::kNull;
  try {
    MsgpackReader reader(bytes, kMaxDecodeNesting);
    kind = reader.skip(0);
    reader.finish();
  } catch (const Error& error) {
    throw_invalid(std::string(what) + " header " + error.what());
  }
  if (kind != Kind::kMap) {
    throw_invalid(std::string(what) + " header must be a MessagePack map, got " + type_name(kind));
  }
  return EncodedMap(bytes, 0, what, allowed);
}

std::string msgpack_of(const Json& value) {
  std::string out;
  Json::to_msgpack(value, nlohmann::detail::output_adapter<char>(out));
  return out;
}

// Each sample's entry is checked before anything decodes it: a peer's
// deeply nested entry must be an error, not a stack overflow. The entries
// lie back to back, so one reader walks them all: each must be one map that
// ends where the next entry begins.
CustomMetaList decode_custom_meta(const EncodedMap& header, size_t samples) {
  const std::string_view bytes = header.binary("custom_meta");
  const std::vector<uint32_t> offsets = header.numbers<uint32_t>("custom_meta_offsets");
  if (offsets.size() != samples + 1) header.fail("custom_meta_offsets", "must hold one offset per sample, plus one");
  CustomMetaList::check_offsets(bytes.size(), offsets);
  MsgpackReader reader(bytes, kMaxDecodeNesting);
  CustomMetaList out;
  out.reserve(samples, bytes.size());
  for (size_t i = 0; i < samples; ++i) {
    const std::string_view entry = bytes.substr(offsets[i], offsets[i + 1] - offsets[i]);
    if (!entry.empty()) {
      Kind kind = Kind::kNull;
      try {
        kind = reader.skip(0);
      } catch (const Error& error) {
        header.fail("custom_meta", "entry " + std::to_string(i) + " " + error.what());
      }
      if (kind != Kind::kMap || reader.position() != offsets[i + 1]) {
        header.fail("custom_meta", "entry " + std::to_string(i) + " must be one MessagePack map");
      }
    }
    out.push_back_encoded(entry);
  }
  return out;
}

void write_schemas(MsgpackWriter& out, const std::map<std::string, FieldSchema>& schemas) {
  out.map(schemas.size());
  for (const auto& [field, schema] : schemas) {
    out.string(field);
    out.map(4);
    out.string("dtype");
    out.string(dtype_name(schema.dtype));
    out.string("shape");
    out.numbers(std::span<const int64_t>(schema.shape));
    out.string("nested");
    out.boolean(schema.is_nested);
    out.string("object");
    out.boolean(schema.is_object);
  }
}

// The schemas that `bytes` hold, one value inside `depth` containers.
std::map<std::string, FieldSchema> read_schemas(std::string_view bytes, size_t depth, std::string_view what) {
  MsgpackReader reader(bytes, kMaxDecodeNesting);
  const MsgpackReader::Token map = reader.next(depth);
  if (map.kind != Kind::kMap) throw_invalid(std::string(what) + " field schema must be a map");
  std::map<std::string, FieldSchema> out;
  for (uint64_t i = 0; i < map.number; ++i) {
    const std::string_view field = reader.key();
    const size_t start = reader.position();
    reader.skip(depth + 1);
    const EncodedMap entry(bytes.substr(start, reader.position() - start), depth + 1, what,
                           {"dtype", "shape", "nested", "object"}, field);
    FieldSchema schema;
    schema.dtype = parse_dtype(entry.text("dtype"));
    schema.shape = entry.numbers<int64_t>("shape");
    schema.is_nested = entry.boolean("nested");
    schema.is_object = entry.boolean("object");
    out.insert_or_assign(std::string(field), std::move(schema));  // a repeated field: the last one wins
  }
  return out;
}

// Per field, one version per sample: a map of field names to uint64 arrays.
void write_field_versions(MsgpackWriter& out, const FieldVersions& versions) {
  out.map(versions.size());
  for (const auto& [field, per_sample] : versions) {
    out.string(field);
    out.numbers(std::span<const uint64_t>(per_sample));
  }
}

// The versions that `bytes` hold, one value inside `depth` containers, each
// field's with one entry per each of `samples`.
FieldVersions read_field_versions(std::string_view bytes, size_t depth, size_t samples, std::string_view what) {
  MsgpackReader reader(bytes, kMaxDecodeNesting);
  const MsgpackReader::Token map = reader.next(depth);
  if (map.kind != Kind::kMap) throw_invalid(std::string(what) + " field \"versions\" must be a map");
  FieldVersions out;
  for (uint64_t i = 0; i < map.number; ++i) {
    const std::string field(reader.key());
    const MsgpackReader::Token token = reader.next(depth + 1);
    if (token.kind != Kind::kBinary || token.bytes.size() != samples * sizeof(uint64_t)) {
      throw_invalid(std::string(what) + " field \"versions\" of \"" + field + "\" must hold one uint64 per sample (" +
                    std::to_string(samples) + ")");
    }
    std::vector<uint64_t> per_sample(samples);
    if (samples != 0) std::memcpy(per_sample.data(), token.bytes.data(), token.bytes.size());
    out.insert_or_assign(field, std::move(per_sample));  // a repeated field: the last one wins
  }
  return out;
}

// The partition of each of `samples` samples, sent as runs: "partitions"
// (names) and "partition_ends". Map: an EncodedMap or a Header.
template <typename Map>
PartitionIdList partition_runs(const Map& header, size_t samples) {
  const std::vector<std::string> names = header.texts("partitions");
  const auto ends = header.template numbers<uint64_t>("partition_ends");
  if (names.size() != ends.size()) header.fail("partition_ends", "must hold one end per partition");
  PartitionIdList out;
  uint64_t begin = 0;
  for (size_t r = 0; r < names.size(); ++r) {
    if (ends[r] <= begin || ends[r] > samples) header.fail("partition_ends", "must ascend within the sample count");
    out.append(ends[r] - begin, names[r]);
    begin = ends[r];
  }
  if (begin != samples) header.fail("partition_ends", "must end at the sample count " + std::to_string(samples));
  return out;
}

std::string batch_meta_bytes(const BatchMeta& meta) {
  const auto& custom = meta.custom_meta;
  const size_t runs = meta.partition_ids.run_count();
  // Every field's bytes plus room for headers, keys and the schema.
  MsgpackWriter out(256 + 64 * meta.field_schema.size() + 48 * runs + 9 * meta.global_indexes.size() +
                    8 * meta.generations.size() + meta.production_status.size() + custom.bytes().size() +
                    4 * custom.offsets().size() + (8 * meta.size() + 32) * meta.versions.size());
  // "versions" only when a field was overwritten: the common path carries nothing.
  out.map(meta.versions.empty() ? 9 : 10);
  if (!meta.versions.empty()) {
    out.string("versions");
    write_field_versions(out, meta.versions);
  }
  out.string("indexes");
  out.numbers(std::span<const int64_t>(meta.global_indexes));
  out.string("generations");
  out.numbers(std::span<const uint64_t>(meta.generations));
  out.string("partitions");
  out.array(runs);
  std::vector<uint64_t> ends(runs);
  for (size_t r = 0; r < runs; ++r) {
    out.string(meta.partition_ids.run_name(r));
    ends[r] = meta.partition_ids.run_end(r);
  }
  out.string("partition_ends");
  out.numbers(std::span<const uint64_t>(ends));
  out.string("schema");
  write_schemas(out, meta.field_schema);
  out.string("produced");
  out.numbers(std::span<const uint8_t>(meta.production_status));
  out.string("custom_meta");
  out.numbers(std::span<const char>(custom.bytes()));
  out.string("custom_meta_offsets");
  out.numbers(std::span<const uint32_t>(custom.offsets()));
  out.string("extra_info");
  out.value(meta.extra_info);
  return std::move(out).take();
}

BatchMeta batch_meta_of(std::string_view bytes, std::string_view what) {
  const EncodedMap header =
      encoded_header(bytes, what,
                     {"indexes", "generations", "partitions", "partition_ends", "schema", "produced", "custom_meta",
                      "custom_meta_offsets", "extra_info", "versions"});
  BatchMeta meta;
  meta.global_indexes = header.numbers<int64_t>("indexes");
  const size_t n = meta.global_indexes.size();
  // Empty: not known (a BatchMeta built by hand).
  if (header.has("generations")) meta.generations = header.numbers<uint64_t>("generations");
  if (!meta.generations.empty() && meta.generations.size() != n) {
    header.fail("generations", "must hold one generation per sample, or none");
  }
  meta.partition_ids = partition_runs(header, n);
  meta.field_schema = read_schemas(header.value("schema"), header.depth() + 1, what);
  meta.production_status = header.numbers<uint8_t>("produced");
  if (meta.production_status.size() != n * meta.field_schema.size()) {
    header.fail("produced", "must hold one flag per sample and field");
  }
  meta.custom_meta = decode_custom_meta(header, n);
  meta.extra_info = header.decoded("extra_info");
  if (!meta.extra_info.is_object()) header.fail("extra_info", "must be a map");
  if (header.has("versions"))
    meta.versions = read_field_versions(header.value("versions"), header.depth() + 1, n, what);
  return meta;
}

// Every partition's keys and tags back to back, offsets running on across
// partitions; partition_ends says where each partition's keys end.
std::string kv_list_bytes(const std::vector<PartitionKeys>& listed) {
  size_t keys = 0, key_bytes = 0, tag_bytes = 0;
  for (const PartitionKeys& partition : listed) {
    keys += partition.size();
    key_bytes += partition.key_bytes().size();
    tag_bytes += partition.tag_bytes().size();
  }
  if (key_bytes > std::numeric_limits<uint32_t>::max() || tag_bytes > std::numeric_limits<uint32_t>::max()) {
    throw_invalid("kv_list reply exceeds 4 GiB of keys or tags: list one partition at a time");
  }
  std::vector<uint64_t> ends;
  std::vector<uint32_t> key_offsets{0}, tag_offsets{0};
  ends.reserve(listed.size());
  key_offsets.reserve(keys + 1);
  tag_offsets.reserve(keys + 1);
  auto append_shifted = [](std::vector<uint32_t>& to, const std::vector<uint32_t>& offsets) {
    const uint32_t shift = to.back();
    for (size_t i = 1; i < offsets.size(); ++i) to.push_back(offsets[i] + shift);
  };
  for (const PartitionKeys& partition : listed) {
    append_shifted(key_offsets, partition.key_offsets());
    append_shifted(tag_offsets, partition.tag_offsets());
    ends.push_back(key_offsets.size() - 1);
  }
  std::vector<uint64_t> versions;
  std::vector<uint8_t> unchanged;
  for (const PartitionKeys& partition : listed) {
    versions.insert(versions.end(), {partition.version().epoch, partition.version().changes});
    unchanged.push_back(partition.is_unchanged() ? 1 : 0);
  }
  MsgpackWriter out(256 + 64 * listed.size() + key_bytes + tag_bytes + 8 * (keys + 1));
  out.map(8);
  out.string("partitions");
  out.array(listed.size());
  for (const PartitionKeys& partition : listed) out.string(partition.partition_id());
  out.string("partition_ends");
  out.numbers(std::span<const uint64_t>(ends));
  out.string("versions");
  out.numbers(std::span<const uint64_t>(versions));
  out.string("unchanged");
  out.numbers(std::span<const uint8_t>(unchanged));
  std::vector<std::string_view> key_parts, tag_parts;
  for (const PartitionKeys& partition : listed) {
    key_parts.push_back(partition.key_bytes());
    tag_parts.push_back(partition.tag_bytes());
  }
  out.string("keys");
  out.binary(std::span<const std::string_view>(key_parts));
  out.string("key_offsets");
  out.numbers(std::span<const uint32_t>(key_offsets));
  out.string("tags");
  out.binary(std::span<const std::string_view>(tag_parts));
  out.string("tag_offsets");
  out.numbers(std::span<const uint32_t>(tag_offsets));
  return std::move(out).take();
}

// Each partition's listing views `bytes`, which `owner` keeps alive: 100k
// keys are not copied again. Tags are checked where they are decoded.
std::vector<PartitionKeys> kv_list_of(std::string_view bytes, const std::shared_ptr<const void>& owner,
                                      std::string_view what) {
  const EncodedMap header = encoded_header(
      bytes, what,
      {"partitions", "partition_ends", "versions", "unchanged", "keys", "key_offsets", "tags", "tag_offsets"});
  const std::vector<std::string> names = header.texts("partitions");
  const std::vector<uint64_t> ends = header.numbers<uint64_t>("partition_ends");
  if (names.size() != ends.size()) header.fail("partition_ends", "must hold one end per partition");
  const std::vector<uint64_t> versions = header.numbers<uint64_t>("versions");
  if (versions.size() != 2 * names.size()) header.fail("versions", "must hold an epoch and a count per partition");
  const std::vector<uint8_t> unchanged = header.numbers<uint8_t>("unchanged");
  if (unchanged.size() != names.size()) header.fail("unchanged", "must hold one flag per partition");
  const std::string_view keys = header.binary("keys"), tags = header.binary("tags");
  const std::vector<uint32_t> key_offsets = header.numbers<uint32_t>("key_offsets");
  const std::vector<uint32_t> tag_offsets = header.numbers<uint32_t>("tag_offsets");
  const uint64_t count = std::max<size_t>(key_offsets.size(), 1) - 1;
  // Partition p's slice [begin, end] of the offsets, rebased to 0.
  auto slice = [](const std::vector<uint32_t>& offsets, uint64_t begin, uint64_t end) {
    std::vector<uint32_t> out(offsets.begin() + static_cast<std::ptrdiff_t>(begin),
                              offsets.begin() + static_cast<std::ptrdiff_t>(end) + 1);
    for (uint32_t& offset : out) offset -= offsets[begin];
    return out;
  };
  // Every offset in its bytes and ascending, before any slice is taken.
  auto in_bounds = [](const std::vector<uint32_t>& offsets, std::string_view all) {
    return !offsets.empty() && offsets.front() == 0 && offsets.back() == all.size() &&
           std::is_sorted(offsets.begin(), offsets.end());
  };
  if (!in_bounds(key_offsets, keys)) {
    header.fail("key_offsets", "must ascend from 0 to the key bytes' count " + std::to_string(keys.size()));
  }
  if (tag_offsets.size() != key_offsets.size()) header.fail("tag_offsets", "must hold one offset per key, plus one");
  if (!in_bounds(tag_offsets, tags)) {
    header.fail("tag_offsets", "must ascend from 0 to the tag bytes' count " + std::to_string(tags.size()));
  }
  std::vector<PartitionKeys> out;
  out.reserve(names.size());
  uint64_t begin = 0;
  for (size_t p = 0; p < names.size(); ++p) {
    if (ends[p] < begin || ends[p] > count) header.fail("partition_ends", "must not descend nor pass the key count");
    const ListingVersion version{versions[2 * p], versions[2 * p + 1]};
    if (unchanged[p] > 1) header.fail("unchanged", "must hold flags of 0 or 1");
    if (unchanged[p] == 1) {
      if (ends[p] != begin) header.fail("unchanged", "names a partition listed with keys");
      out.push_back(PartitionKeys::unchanged(names[p], version));
      continue;
    }
    out.push_back(PartitionKeys::over(
        names[p], owner, keys.substr(key_offsets[begin], key_offsets[ends[p]] - key_offsets[begin]),
        slice(key_offsets, begin, ends[p]), tags.substr(tag_offsets[begin], tag_offsets[ends[p]] - tag_offsets[begin]),
        slice(tag_offsets, begin, ends[p])));
    out.back().set_version(version);
    begin = ends[p];
  }
  if (begin != count) header.fail("partition_ends", "must end at the key count " + std::to_string(count));
  return out;
}

std::string meta_request_bytes(const MetaRequest& request) {
  const char* mode = request.mode == MetaMode::kInsert  ? "insert"
                     : request.mode == MetaMode::kFetch ? "fetch"
                                                        : "force_fetch";
  const bool has_extra = !request.sampling.extra.is_null();
  MsgpackWriter out(256);
  out.map(has_extra ? 11 : 10);
  out.string("fields");
  out.array(request.fields.size());
  for (const std::string& field : request.fields) out.string(field);
  out.string("batch_size");
  out.integer(request.batch_size);
  out.string("partition_id");
  out.string(request.partition_id);
  out.string("mode");
  out.string(mode);
  out.string("task_name");
  out.string(request.task_name);
  out.string("dp_rank");
  out.integer(request.sampling.dp_rank);
  out.string("batch_index");
  out.integer(request.sampling.batch_index);
  out.string("dp_rank_given");
  out.boolean(request.sampling.dp_rank_given);
  if (has_extra) {  // absent when empty: a plain fetch pays nothing for it
    out.string("sampling_extra");
    out.value(request.sampling.extra);
  }
  out.string("polling");
  out.boolean(request.polling);
  out.string("timeout_ms");
  out.integer(request.timeout.count());
  return std::move(out).take();
}

MetaRequest meta_request_of(std::string_view bytes, std::string_view what) {
  const EncodedMap header = encoded_header(bytes, what,
                                           {"fields", "batch_size", "partition_id", "mode", "task_name", "dp_rank",
                                            "batch_index", "dp_rank_given", "sampling_extra", "polling", "timeout_ms"});
  MetaRequest request;
  request.fields = header.texts("fields");
  request.batch_size = header.integer("batch_size");
  request.partition_id = header.text("partition_id");
  request.mode = parse_meta_mode(header.text("mode"));
  request.task_name = header.text("task_name");
  request.sampling.dp_rank = header.integer("dp_rank");
  request.sampling.batch_index = header.integer("batch_index");
  request.sampling.dp_rank_given = header.boolean("dp_rank_given");
  if (header.has("sampling_extra")) {
    request.sampling.extra = header.decoded("sampling_extra");
    if (!request.sampling.extra.is_object()) header.fail("sampling_extra", "must be a map");
  }
  request.polling = header.boolean("polling");
  request.timeout = std::chrono::milliseconds(header.integer("timeout_ms"));
  return request;
}

Json encode_shapes(const std::vector<Shape>& shapes) {
  Json out = Json::array();
  for (const Shape& shape : shapes) out.push_back(binary_of(std::span<const int64_t>(shape)));
  return out;
}

std::vector<Shape> decode_shapes(const Header& entry, std::string_view key) {
  const Json& value = entry.at(key);
  if (!value.is_array()) entry.fail(key, "must be an array of shapes");
  std::vector<Shape> shapes;
  shapes.reserve(value.size());
  for (const Json& shape : value) {
    if (!shape.is_binary() || shape.get_binary().size() % sizeof(int64_t) != 0) {
      entry.fail(key, "must hold binary int64 shapes");
    }
    Shape dims(shape.get_binary().size() / sizeof(int64_t));
    if (!dims.empty()) std::memcpy(dims.data(), shape.get_binary().data(), shape.get_binary().size());
    shapes.push_back(std::move(dims));
  }
  return shapes;
}

// True when the samples at `positions` lie back to back in the column's buffer.
bool contiguous(const Column& column, std::span<const size_t> positions) {
  for (size_t i = 1; i < positions.size(); ++i) {
    if (column.offsets[positions[i]] != column.offsets[positions[i - 1] + 1]) return false;
  }
  return true;
}

// A column restricted to `positions`: its header entry,
// laid out as if its samples were packed back to back, and where each
// sample's bytes lie in the column's buffer.
Json column_entry(const Column& column, std::span<const size_t> positions,
                  std::vector<std::span<const std::byte>>& samples) {
  std::vector<uint64_t> offsets;
  offsets.reserve(positions.size() + 1);
  std::vector<Shape> shapes;
  const bool one_shape = column.shapes.size() == 1;
  if (one_shape) shapes.push_back(column.shapes.front());
  offsets.push_back(0);
  samples.reserve(positions.size());
  for (size_t p : positions) {
    const size_t size = column.offsets[p + 1] - column.offsets[p];
    offsets.push_back(offsets.back() + size);
    samples.emplace_back(column.buffer->data + column.offsets[p], size);
    if (!one_shape) shapes.push_back(column.shape_of(p));
  }
  return Json{{"field", column.field},
              {"dtype", std::string(dtype_name(column.dtype))},
              {"object", column.is_object},
              {"shapes", encode_shapes(shapes)},
              {"offsets", binary_of(std::span<const uint64_t>(offsets))}};
}

Json append_column(const Column& column, std::span<const size_t> positions, Frames& frames) {
  std::vector<std::span<const std::byte>> samples;
  Json entry = column_entry(column, positions, samples);
  size_t total = 0;
  for (const auto& sample : samples) total += sample.size();
  if (contiguous(column, positions)) {
    frames.push_back(frame_of(column.buffer, positions.empty() ? 0 : column.offsets[positions.front()], total));
  } else {
    // Packed into an aligned buffer (huge pages when large): a message of
    // the size allocated by ZeroMQ faults in 4 KiB pages, which made packing
    // the 128 MiB columns of a put to several units slower than the network.
    WritableBuffer packed = allocate_buffer(total);
    size_t at = 0;
    for (const auto& sample : samples) {
      if (!sample.empty()) std::memcpy(packed.data + at, sample.data(), sample.size());
      at += sample.size();
    }
    frames.push_back(frame_of(std::move(packed.buffer), 0, total));
  }
  return entry;
}

// All samples of the columns when `positions` is empty.
std::span<const size_t> positions_or_all(const std::vector<Column>& columns, std::span<const size_t> positions,
                                         std::vector<size_t>& all) {
  if (!positions.empty() || columns.empty()) return positions;
  all.resize(columns.front().sample_count());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return all;
}

}  // namespace

zmq::message_t header_frame(const Json& header) {
  std::vector<uint8_t> bytes = Json::to_msgpack(header);
  return copy_frame(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

Json read_header(const Frames& frames, size_t index, std::string_view what) {
  const std::string_view bytes = header_bytes(frames, index, what);
  Json out;
  try {
    out = msgpack_to_json(bytes, kMaxDecodeNesting);
  } catch (const Error& error) {
    throw_invalid(std::string(what) + " header " + error.what());
  }
  if (!out.is_object()) {
    throw_invalid(std::string(what) + " header must be a MessagePack map, got " + out.type_name());
  }
  return out;
}

Header::Header(const Json& header, std::string_view what, std::initializer_list<std::string_view> allowed)
    : header_(header), what_(what) {
  if (!header_.is_object()) {
    throw_invalid(what_ + " must be a map, got " + std::string(header_.type_name()));
  }
  for (const auto& item : header_.items()) {
    if (std::find(allowed.begin(), allowed.end(), item.key()) == allowed.end()) {
      throw_invalid(what_ + " has an unknown field " + in_quotes(item.key()));
    }
  }
}

void Header::fail(std::string_view key, std::string_view problem) const {
  throw_invalid(what_ + " field " + in_quotes(key) + " " + std::string(problem));
}

bool Header::has(std::string_view key) const {
  auto it = header_.find(key);
  return it != header_.end() && !it->is_null();
}

const Json& Header::at(std::string_view key) const {
  auto it = header_.find(key);
  if (it == header_.end()) throw_invalid(what_ + " lacks the field " + in_quotes(key));
  return *it;
}

std::string Header::text(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_string()) fail(key, "must be a string, got " + std::string(value.type_name()));
  return value.get<std::string>();
}

int64_t Header::integer(std::string_view key) const {
  const Json& value = at(key);
  if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
    fail(key, "is out of range");
  }
  if (!value.is_number_integer()) fail(key, "must be an integer, got " + std::string(value.type_name()));
  return value.get<int64_t>();
}

bool Header::boolean(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_boolean()) fail(key, "must be a boolean, got " + std::string(value.type_name()));
  return value.get<bool>();
}

std::vector<std::string> Header::texts(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_array()) fail(key, "must be an array of strings");
  std::vector<std::string> out;
  out.reserve(value.size());
  for (const Json& item : value) {
    if (!item.is_string()) fail(key, "must be an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

Json encode_objects(std::span<const Value> values) {
  Json out = Json::array();
  for (const Value& value : values) out.push_back(to_json(value));
  return out;
}

std::vector<Value> Header::objects(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_array()) fail(key, "must be an array of maps");
  std::vector<Value> out;
  out.reserve(value.size());
  for (const Json& item : value) {
    if (!item.is_object() && !item.is_null()) fail(key, "must be an array of maps");
    try {
      out.push_back(from_json(item));
    } catch (const Error& error) {
      fail(key, error.what());
    }
  }
  return out;
}

Json encode_schemas(const std::map<std::string, FieldSchema>& schemas) {
  MsgpackWriter out;
  write_schemas(out, schemas);
  return msgpack_to_json(out.bytes(), kMaxDecodeNesting);
}

std::map<std::string, FieldSchema> decode_schemas(const Json& value, std::string_view what) {
  return read_schemas(msgpack_of(value), 0, what);
}

zmq::message_t batch_meta_frame(const BatchMeta& meta) { return frame_of(batch_meta_bytes(meta)); }

BatchMeta read_batch_meta(const Frames& frames, size_t index, std::string_view what) {
  return batch_meta_of(header_bytes(frames, index, what), what);
}

zmq::message_t kv_list_frame(const std::vector<PartitionKeys>& listed) { return frame_of(kv_list_bytes(listed)); }

Json kv_list_request(const std::string* partition_id, const std::map<std::string, ListingVersion>& known) {
  Json request = Json::object();
  if (partition_id != nullptr) request["partition_id"] = *partition_id;
  if (known.empty()) return request;
  std::vector<std::string> names;
  std::vector<uint64_t> versions;
  for (const auto& [name, version] : known) {
    names.push_back(name);
    versions.insert(versions.end(), {version.epoch, version.changes});
  }
  request["known_partitions"] = std::move(names);
  request["known_versions"] = binary_of(std::span<const uint64_t>(versions));
  return request;
}

std::map<std::string, ListingVersion> read_known_listings(const Header& request) {
  std::map<std::string, ListingVersion> known;
  if (!request.has("known_partitions")) return known;
  const std::vector<std::string> names = request.texts("known_partitions");
  const std::vector<uint64_t> versions = request.numbers<uint64_t>("known_versions");
  if (versions.size() != 2 * names.size()) {
    request.fail("known_versions", "must hold an epoch and a count per known partition");
  }
  for (size_t i = 0; i < names.size(); ++i) known[names[i]] = ListingVersion{versions[2 * i], versions[2 * i + 1]};
  return known;
}

std::vector<PartitionKeys> read_kv_list(Frames& frames, size_t index, std::string_view what) {
  header_bytes(frames, index, what);  // there, or a clear error
  const std::shared_ptr<const Buffer> frame = buffer_of(std::move(frames[index]));
  return kv_list_of(std::string_view(reinterpret_cast<const char*>(frame->data), frame->size), frame, what);
}

zmq::message_t meta_request_frame(const MetaRequest& request) { return copy_frame(meta_request_bytes(request)); }

MetaRequest read_meta_request(const Frames& frames, size_t index, std::string_view what) {
  return meta_request_of(header_bytes(frames, index, what), what);
}

void add_sample_keys(Json& header, const SampleKeys& samples, std::span<const size_t> positions) {
  std::vector<int64_t> indexes;
  std::vector<uint64_t> generations;
  PartitionIdList partitions;
  indexes.reserve(positions.size());
  for (const size_t p : positions) {
    indexes.push_back(samples.global_indexes[p]);
    partitions.push_back(samples.partitions[p]);
    if (!samples.generations.empty()) generations.push_back(samples.generations[p]);
  }
  std::vector<std::string> names;
  std::vector<uint64_t> ends;
  for (size_t r = 0; r < partitions.run_count(); ++r) {
    names.push_back(partitions.run_name(r));
    ends.push_back(partitions.run_end(r));
  }
  header["indexes"] = binary_of(std::span<const int64_t>(indexes));
  header["partitions"] = std::move(names);
  header["partition_ends"] = binary_of(std::span<const uint64_t>(ends));
  if (!samples.generations.empty()) header["generations"] = binary_of(std::span<const uint64_t>(generations));
  if (samples.write_version != 0) header["write_version"] = samples.write_version;
  if (samples.read_versions == nullptr || samples.read_versions->empty()) return;
  Json read_versions = Json::object();
  std::vector<uint64_t> versions(positions.size());
  for (const auto& [field, all] : *samples.read_versions) {
    if (all.size() != samples.global_indexes.size()) {
      throw_invalid("read_versions of field \"" + field + "\" holds " + std::to_string(all.size()) + " versions for " +
                    std::to_string(samples.global_indexes.size()) + " global indexes; give one per index");
    }
    for (size_t i = 0; i < positions.size(); ++i) versions[i] = all[positions[i]];
    read_versions[field] = binary_of(std::span<const uint64_t>(versions));
  }
  header["read_versions"] = std::move(read_versions);
}

// header[key]: field -> binary array of one u64 version per sample.
static FieldVersions field_versions_at(const Header& header, std::string_view key, size_t n) {
  const Json& fields = header.at(key);
  if (!fields.is_object()) header.fail(key, "must be a map of field to versions");
  FieldVersions out;
  for (const auto& [field, versions] : fields.items()) {
    const std::string where = "of field " + in_quotes(field);
    if (!versions.is_binary()) header.fail(key, where + " must be a binary array");
    const auto& bytes = versions.get_binary();
    // Checked before anything is allocated: the sender's count is not trusted.
    if (bytes.size() != n * sizeof(uint64_t)) {
      header.fail(key, where + " holds " + std::to_string(bytes.size()) + " bytes; " + std::to_string(n) +
                           " samples need one u64 version each (" + std::to_string(n * sizeof(uint64_t)) + " bytes)");
    }
    std::vector<uint64_t> read(n);
    if (n != 0) std::memcpy(read.data(), bytes.data(), bytes.size());
    out.insert_or_assign(field, std::move(read));
  }
  return out;
}

SampleKeyColumns read_sample_keys(const Header& header) {
  SampleKeyColumns out;
  out.global_indexes = header.numbers<int64_t>("indexes");
  const size_t n = out.global_indexes.size();
  out.partitions = partition_runs(header, n);
  if (header.has("generations")) {
    out.generations = header.numbers<uint64_t>("generations");
    if (out.generations.size() != n) header.fail("generations", "must hold one generation per sample");
  }
  if (header.has("write_version")) {
    const Json& version = header.at("write_version");
    if (!version.is_number_unsigned()) {
      // Never dump(): a peer's string may not be UTF-8.
      const std::string got =
          version.is_number_integer() ? std::to_string(version.get<int64_t>()) : std::string(version.type_name());
      header.fail("write_version", "must be an unsigned integer, got " + got);
    }
    out.write_version = version.get<uint64_t>();
  }
  if (header.has("read_versions")) out.read_versions = field_versions_at(header, "read_versions", n);
  return out;
}

Json encode_committed_write(const CommittedWrite& committed) {
  Json reply = Json::object();
  if (committed.versions.empty()) return reply;
  Json versions = Json::object();
  for (const auto& [field, per_sample] : committed.versions) versions[field] = binary_of(std::span(per_sample));
  reply["versions"] = std::move(versions);
  if (!committed.newer_meta_positions.empty()) {
    reply["newer_meta_positions"] = binary_of(std::span(committed.newer_meta_positions));
    reply["newer_metas"] = encode_objects(committed.newer_metas);
  }
  return reply;
}

CommittedWrite decode_committed_write(const Json& reply, size_t samples, std::string_view what) {
  const Header header(reply, what, {"versions", "newer_meta_positions", "newer_metas"});
  CommittedWrite out;
  if (header.has("versions")) out.versions = field_versions_at(header, "versions", samples);
  if (!header.has("newer_meta_positions")) return out;
  out.newer_meta_positions = header.numbers<int64_t>("newer_meta_positions");
  out.newer_metas = header.objects("newer_metas");
  if (out.newer_metas.size() != out.newer_meta_positions.size()) {
    header.fail("newer_metas", "must hold one object per position in newer_meta_positions");
  }
  for (int64_t position : out.newer_meta_positions) {
    if (position < 0 || static_cast<size_t>(position) >= samples) {
      header.fail("newer_meta_positions", "holds " + std::to_string(position) + ", outside the " +
                                              std::to_string(samples) + " samples written");
    }
  }
  return out;
}

Json encode_batch_meta(const BatchMeta& meta) { return msgpack_to_json(batch_meta_bytes(meta), kMaxDecodeNesting); }

BatchMeta decode_batch_meta(const Json& value, std::string_view what) { return batch_meta_of(msgpack_of(value), what); }

Json encode_kv_list(const std::vector<PartitionKeys>& listed) {
  return msgpack_to_json(kv_list_bytes(listed), kMaxDecodeNesting);
}

std::vector<PartitionKeys> decode_kv_list(const Json& value, std::string_view what) {
  const auto bytes = std::make_shared<const std::string>(msgpack_of(value));
  return kv_list_of(*bytes, bytes, what);
}

Json encode_meta_request(const MetaRequest& request) {
  return msgpack_to_json(meta_request_bytes(request), kMaxDecodeNesting);
}

MetaRequest decode_meta_request(const Json& value, std::string_view what) {
  return meta_request_of(msgpack_of(value), what);
}

Json encode_status(const std::vector<std::pair<int64_t, bool>>& status) {
  std::vector<int64_t> indexes;
  std::vector<uint8_t> flags;
  indexes.reserve(status.size());
  flags.reserve(status.size());
  for (const auto& [index, flag] : status) {
    indexes.push_back(index);
    flags.push_back(flag ? 1 : 0);
  }
  return Json{{"indexes", binary_of(std::span<const int64_t>(indexes))},
              {"flags", binary_of(std::span<const uint8_t>(flags))}};
}

std::vector<std::pair<int64_t, bool>> decode_status(const Json& value, std::string_view what) {
  const Header header(value, what, {"indexes", "flags"});
  const auto indexes = header.numbers<int64_t>("indexes");
  const auto flags = header.numbers<uint8_t>("flags");
  if (indexes.size() != flags.size()) header.fail("flags", "must hold one flag per index");
  std::vector<std::pair<int64_t, bool>> out;
  out.reserve(indexes.size());
  for (size_t i = 0; i < indexes.size(); ++i) out.emplace_back(indexes[i], flags[i] != 0);
  return out;
}

Json append_columns(const std::vector<Column>& columns, std::span<const size_t> positions, Frames& frames) {
  std::vector<size_t> all;
  positions = positions_or_all(columns, positions, all);
  Json out = Json::array();
  for (const Column& column : columns) out.push_back(append_column(column, positions, frames));
  return out;
}

Json describe_columns(const std::vector<Column>& columns, std::span<const size_t> positions,
                      std::vector<std::vector<std::span<const std::byte>>>& pieces) {
  std::vector<size_t> all;
  positions = positions_or_all(columns, positions, all);
  Json out = Json::array();
  for (const Column& column : columns) {
    pieces.emplace_back();
    out.push_back(column_entry(column, positions, pieces.back()));
  }
  return out;
}

std::vector<Column> take_columns(const Json& entries, Frames& frames, size_t first, size_t samples,
                                 std::string_view what) {
  if (!entries.is_array()) throw_invalid(std::string(what) + " columns must be an array");
  if (frames.size() != first + entries.size()) {
    throw_invalid(std::string(what) + " names " + std::to_string(entries.size()) + " columns but carries " +
                  std::to_string(frames.size() > first ? frames.size() - first : 0) + " data frames");
  }
  std::vector<Column> columns;
  columns.reserve(entries.size());
  for (size_t c = 0; c < entries.size(); ++c) {
    const Header entry(entries[c], std::string(what) + " column " + std::to_string(c),
                       {"field", "dtype", "object", "shapes", "offsets"});
    Column column;
    column.field = entry.text("field");
    column.dtype = parse_dtype(entry.text("dtype"));
    column.is_object = entry.boolean("object");
    column.shapes = decode_shapes(entry, "shapes");
    const auto offsets = entry.numbers<uint64_t>("offsets");
    if (offsets.size() != samples + 1) {
      entry.fail("offsets", "must hold " + std::to_string(samples + 1) + " offsets");
    }
    if (column.shapes.size() != 1 && column.shapes.size() != samples) {
      entry.fail("shapes", "must hold one shape or one per sample");
    }
    column.offsets.assign(offsets.begin(), offsets.end());
    column.buffer = buffer_of(std::move(frames[first + c]));
    column.validate();  // offsets and shapes against the frame's bytes
    columns.push_back(std::move(column));
  }
  return columns;
}

Json append_views(const std::vector<std::vector<SampleView>>& rows, size_t fields, Frames& frames) {
  const size_t first = frames.size();  // frame numbers count from here
  Json out = Json::array();
  for (size_t f = 0; f < fields; ++f) {
    std::vector<uint32_t> frame_index;
    std::vector<uint64_t> offsets, sizes;
    std::vector<uint8_t> dtypes, objects;
    std::vector<Shape> shapes;
    const Buffer* run_buffer = nullptr;
    size_t run_begin = 0, run_end = 0;
    std::shared_ptr<const Buffer> run_owner;
    auto close_run = [&] {
      if (run_buffer != nullptr) frames.push_back(frame_of(run_owner, run_begin, run_end - run_begin));
    };
    for (const auto& row : rows) {
      const SampleView& view = row.at(f);
      if (view.buffer.get() != run_buffer || view.offset != run_end) {
        close_run();
        run_buffer = view.buffer.get();
        run_owner = view.buffer;
        run_begin = run_end = view.offset;
      }
      frame_index.push_back(static_cast<uint32_t>(frames.size() - first));
      offsets.push_back(view.offset - run_begin);
      sizes.push_back(view.nbytes);
      run_end = view.offset + view.nbytes;
      dtypes.push_back(static_cast<uint8_t>(view.dtype));
      objects.push_back(view.is_object ? 1 : 0);
      shapes.push_back(view.shape);
    }
    close_run();
    out.push_back(Json{{"frames", binary_of(std::span<const uint32_t>(frame_index))},
                       {"offsets", binary_of(std::span<const uint64_t>(offsets))},
                       {"sizes", binary_of(std::span<const uint64_t>(sizes))},
                       {"dtypes", binary_of(std::span<const uint8_t>(dtypes))},
                       {"objects", binary_of(std::span<const uint8_t>(objects))},
                       {"shapes", encode_shapes(shapes)}});
  }
  return out;
}

std::vector<std::vector<SampleView>> take_views(const Json& entry_list, Frames& frames, size_t first, size_t rows,
                                                size_t fields, std::string_view what) {
  if (!entry_list.is_array() || entry_list.size() != fields) {
    throw_invalid(std::string(what) + " must describe " + std::to_string(fields) + " fields");
  }
  std::vector<std::shared_ptr<const Buffer>> buffers;
  buffers.reserve(frames.size() - std::min(first, frames.size()));
  for (size_t i = first; i < frames.size(); ++i) buffers.push_back(buffer_of(std::move(frames[i])));
  std::vector<std::vector<SampleView>> out(rows, std::vector<SampleView>(fields));
  const auto dtype_count = static_cast<uint8_t>(DType::kFloat64) + 1;
  for (size_t f = 0; f < fields; ++f) {
    const Header entry(entry_list[f], std::string(what) + " field " + std::to_string(f),
                       {"frames", "offsets", "sizes", "dtypes", "objects", "shapes"});
    const auto frame_index = entry.numbers<uint32_t>("frames");
    const auto offsets = entry.numbers<uint64_t>("offsets");
    const auto sizes = entry.numbers<uint64_t>("sizes");
    const auto dtypes = entry.numbers<uint8_t>("dtypes");
    const auto objects = entry.numbers<uint8_t>("objects");
    const auto shapes = decode_shapes(entry, "shapes");
    for (const size_t count :
         {frame_index.size(), offsets.size(), sizes.size(), dtypes.size(), objects.size(), shapes.size()}) {
      if (count != rows) entry.fail("frames", "and its siblings must hold one entry per sample");
    }
    for (size_t i = 0; i < rows; ++i) {
      if (frame_index[i] >= buffers.size()) entry.fail("frames", "names a frame that is not there");
      const auto& buffer = buffers[frame_index[i]];
      if (offsets[i] > buffer->size || sizes[i] > buffer->size - offsets[i]) {
        entry.fail("offsets", "points outside its frame");
      }
      if (dtypes[i] >= dtype_count) entry.fail("dtypes", "holds an unknown dtype");
      SampleView& view = out[i][f];
      view.buffer = buffer;
      view.offset = offsets[i];
      view.nbytes = sizes[i];
      view.dtype = static_cast<DType>(dtypes[i]);
      view.is_object = objects[i] != 0;
      view.shape = shapes[i];
      // The storage's own rule, overflow-safe: a huge shape must not wrap
      // around to the byte count and hand readers a tensor larger than its bytes.
      if (auto problem = value_problem(view.dtype, view.is_object, view.shape, view.nbytes)) {
        entry.fail("shapes", "does not match sample " + std::to_string(i) + ": " + *problem);
      }
    }
  }
  return out;
}

}  // namespace seqflow::transport::wire
