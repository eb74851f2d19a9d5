#include "transport/schema_codec.h"

#include "common/encoded_map.h"
#include "common/msgpack_reader.h"

namespace seqflow::transport::wire {

using Kind = MsgpackReader::Kind;

void write_schemas(MsgpackWriter& out, const std::map<std::string, FieldSchema>& schemas, SchemaKeys order) {
  out.map(schemas.size());
  for (const auto& [field, schema] : schemas) {
    out.string(field);
    out.map(4);
    out.string("dtype");
    out.string(dtype_name(schema.dtype));
    const auto shape = [&] {
      out.string("shape");
      out.numbers(std::span<const int64_t>(schema.shape));
    };
    if (order == SchemaKeys::kShapeSecond) shape();
    out.string("nested");
    out.boolean(schema.is_nested);
    out.string("object");
    out.boolean(schema.is_object);
    if (order == SchemaKeys::kSorted) shape();
  }
}

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

}  // namespace seqflow::transport::wire
