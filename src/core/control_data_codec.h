// ControlData in the controller checkpoint: its members of the checkpoint's
// MessagePack map ("partitions", "next_generation", "incarnation"), written
// as every earlier build wrote them (keys in byte order, numbers in their
// shortest forms) and read from any of them.
#pragma once

#include "common/encoded_map.h"
#include "common/msgpack_map_writer.h"
#include "core/control_data.h"
#include "core/fetch_leases.h"

namespace seqflow::core {

// Samples under a fetch lease not yet ended are written unconsumed: whoever
// holds the lease may be gone when the checkpoint loads, and its work was
// not acknowledged.
void write_control_data(MsgpackMapWriter& checkpoint, const ControlData& data, const FetchLeases& leases);

// A fresh ControlData from the checkpoint's map; throws kInvalidArgument
// naming what is wrong. Checks everything the running controller relies on:
// unique live global indexes, known keys and consumed samples, schemas,
// decodable metadata. Keys it does not read are passed over.
ControlData read_control_data(const EncodedMap& checkpoint);

}  // namespace seqflow::core
