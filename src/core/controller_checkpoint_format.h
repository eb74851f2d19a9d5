// The controller checkpoint file: durable's frame around the MessagePack of the
// controller's data and its sampler's state (see controller_checkpoint.cc).
#pragma once

#include "durable/framed_file.h"

namespace seqflow::core {

inline constexpr durable::FileKind kControllerCheckpoint{"SEQFCTRL", "controller checkpoint", 1, 1};

}  // namespace seqflow::core
