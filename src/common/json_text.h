// Value <-> JSON text, for the files people read (a checkpoint's
// manifest.json and metadata.json, workload models) and for messages. The
// text is what earlier builds wrote (with a JSON library), so files and messages
// read as they always have.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "seqflow/value.h"

namespace seqflow {

// Compact (indent < 0), or one member per line indented by `indent` spaces.
// A NaN or infinity is written as null, as JSON has neither.
std::string json_text(const Value& value, int indent = -1);

// Throws kInvalidArgument "is not valid JSON: <problem> at byte <at>", also
// when containers nest deeper than `max_depth`. Integers become int64 (or
// uint64 above that), others double; a repeated key's last value wins.
Value parse_json_text(std::string_view text, size_t max_depth);

}  // namespace seqflow
