#include <cstring>

#include "common/msgpack_writer.h"
#include "transport/wire_codec.h"
#include "transport/field_versions_codec.h"
#include "transport/schema_codec.h"

namespace seqflow::transport::wire {
namespace {

using Kind = MsgpackReader::Kind;

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

std::string batch_meta_bytes(const BatchMeta& meta) {
  const auto& custom = meta.custom_meta;
  const size_t runs = meta.partition_ids.run_count();
  // Every field's bytes plus room for headers, keys and the schema.
  MsgpackWriter out(256 + 64 * meta.field_schema.size() + 48 * runs + 9 * meta.global_indexes.size() +
                    8 * meta.generations.size() + meta.production_status.size() + custom.bytes().size() +
                    4 * custom.offsets().size() + (8 * meta.size() + 32) * meta.versions.size());
  // "versions" only when a field was overwritten: the common path carries nothing.
  out.map(9 + (meta.versions.empty() ? 0 : 1) + (meta.lease == 0 ? 0 : 1));
  if (meta.lease != 0) {  // a fetch's lease only
    out.string("lease");
    out.unsigned_integer(meta.lease);
  }
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
  write_schemas(out, meta.field_schema, SchemaKeys::kShapeSecond);
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
                      "custom_meta_offsets", "extra_info", "versions", "lease"});
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
  if (header.has("versions")) meta.versions = field_versions_at(header, "versions", n);
  if (header.has("lease")) {
    const int64_t lease = header.integer("lease");
    if (lease <= 0) header.fail("lease", "must be positive");
    meta.lease = static_cast<uint64_t>(lease);
  }
  return meta;
}

}  // namespace

zmq::message_t batch_meta_frame(const BatchMeta& meta) { return frame_of(batch_meta_bytes(meta)); }

BatchMeta read_batch_meta(const Frames& frames, size_t index, std::string_view what) {
  return batch_meta_of(header_bytes(frames, index, what), what);
}

}  // namespace seqflow::transport::wire
