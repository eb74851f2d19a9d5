// Field schemas as MessagePack, written and read directly (a BatchMeta
// holds them) or through JSON (mark_produced's request). Internal to the
// transport layer's codecs.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "common/msgpack_writer.h"
#include "seqflow/controller.h"

namespace seqflow::transport::wire {

void write_schemas(MsgpackWriter& out, const std::map<std::string, FieldSchema>& schemas);
// The schemas that `bytes` hold, one value inside `depth` containers.
std::map<std::string, FieldSchema> read_schemas(std::string_view bytes, size_t depth, std::string_view what);

}  // namespace seqflow::transport::wire
