// seqflow::Value <-> nlohmann::json, for the internals that keep JSON trees
// (wire headers, checkpoint files). Public headers name only Value.
#pragma once

#include <nlohmann/json.hpp>

#include "seqflow/value.h"

namespace seqflow {

nlohmann::json to_json(const Value& value);
// Throws kInvalidArgument for a binary, which Value does not hold.
Value from_json(const nlohmann::json& value);

}  // namespace seqflow
