// Per field, one version per sample (a BatchMeta's versions, a get's
// read_versions, an overwrite's committed versions): a map of field names
// to uint64 arrays, written and read as MessagePack. Every array must hold
// one version per sample. Internal to the transport layer's codecs.
#pragma once

#include <string_view>

#include "common/msgpack_writer.h"
#include "seqflow/field_versions.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::wire {

void write_field_versions(MsgpackWriter& out, const FieldVersions& versions);
// header[key], as a request or reply naming `samples` samples holds it.
FieldVersions field_versions_at(const EncodedMap& header, std::string_view key, size_t samples);

}  // namespace seqflow::transport::wire
