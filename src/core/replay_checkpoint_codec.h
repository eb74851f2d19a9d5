// The replay state in the controller checkpoint, under keys of its own,
// each written only when there is some: a checkpoint without replay state is
// byte for byte what earlier builds wrote, and earlier builds pass the keys
// over. "replay_groups": per partition, the DAPO classification of its
// finished groups, so that a restored controller does not ask for their
// values again. "replay_passes": the passes kept under a pass_id (their
// remaining lease and held prompts, not their answers), so that an
// acknowledgement after a restore still clears the held prompts and an
// unacknowledged pass still gives them back when its lease ends.
#pragma once

#include <map>
#include <string>

#include "common/encoded_map.h"
#include "common/msgpack_map_writer.h"
#include "core/control_data.h"
#include "core/replay_groups.h"
#include "core/replay_leases.h"

namespace seqflow::core {

// The caches of partitions that exist (and that the cache is of).
void write_replay_groups(MsgpackMapWriter& checkpoint, const ControlData& data,
                         const std::map<std::string, GroupFilterCache>& filters);

// The caches for the partitions of `data` (the checkpoint's, just read); none
// when the checkpoint has no replay state. Groups whose prompt key `data`
// does not hold (and partitions it lacks) are left out. Throws
// kInvalidArgument naming what is wrong: a source that is neither a tag nor
// a metric, a bad or repeated uid or partition, values that are not one
// finite number per filtered group.
std::map<std::string, GroupFilterCache> read_replay_groups(const EncodedMap& checkpoint, const ControlData& data);

// The kept passes, each with its lease's remaining time from `now` and the
// held prompts `data` still holds.
void write_replay_passes(MsgpackMapWriter& checkpoint, const ControlData& data, const ReplayLeases& leases,
                         ReplayLeases::Clock::time_point now);

// Into `leases` (empty), each lease ending its remaining time after `now`.
// Throws kInvalidArgument naming what is wrong: more passes than a
// controller keeps, a pass_id of 0 or named twice, a remaining lease outside
// [0, an hour], an acknowledged pass that holds prompts. Held prompts that
// `data` does not hold (at their generation) are left out.
void read_replay_passes(const EncodedMap& checkpoint, const ControlData& data, ReplayLeases::Clock::time_point now,
                        ReplayLeases& leases);

}  // namespace seqflow::core
