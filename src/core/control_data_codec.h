// ControlData to and from JSON (stored as MessagePack in checkpoints).
#pragma once

#include <nlohmann/json.hpp>

#include "core/control_data.h"

namespace seqflow::core {

nlohmann::json encode_control_data(const ControlData& data);

// A fresh ControlData; throws kInvalidArgument naming what is wrong. Checks
// everything the running controller relies on: unique live global indexes,
// known keys and consumed samples, schemas, decodable metadata.
ControlData decode_control_data(const nlohmann::json& encoded);

}  // namespace seqflow::core
