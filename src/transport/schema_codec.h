// Field schemas as MessagePack (a BatchMeta holds them, and mark_produced's
// request): a map of field name to its schema's map. Internal to the
// transport layer's codecs.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "common/msgpack_writer.h"
#include "seqflow/controller.h"

namespace seqflow::transport::wire {

// A schema's keys in the order each message has always had them: a
// BatchMeta's "dtype", "shape", "nested", "object"; mark_produced's in byte
// order (so both keep their bytes; readers take any order).
enum class SchemaKeys : uint8_t { kShapeSecond, kSorted };
void write_schemas(MsgpackWriter& out, const std::map<std::string, FieldSchema>& schemas, SchemaKeys order);
// The schemas that `bytes` hold, one value inside `depth` containers.
std::map<std::string, FieldSchema> read_schemas(std::string_view bytes, size_t depth, std::string_view what);

}  // namespace seqflow::transport::wire
