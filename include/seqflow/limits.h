// The limits seqflow enforces, one value each, the same in embedded and remote
// mode: a request that passes in one mode passes in the other.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace seqflow {

// custom_meta values and KV tags nest containers at most this deep
// ({"a": 1} is one level, {"a": [1]} two).
inline constexpr size_t kMaxCustomMetaDepth = 32;

// Any MessagePack seqflow decodes (wire messages, checkpoints, custom_meta
// encoded by Python) nests at most this deep: room for kMaxCustomMetaDepth
// inside the containers around it, and no recursion deep enough to exhaust
// the stack on crafted input.
inline constexpr size_t kMaxDecodeNesting = 64;

// Partition ids, field names and KV keys: bytes of UTF-8.
inline constexpr size_t kMaxNameBytes = 1024;

// Global indexes are dense from 0 and reused, so none is ever near this: a
// larger (or negative) one in a request is bad input, refused whole.
inline constexpr int64_t kMaxGlobalIndex = (int64_t{1} << 40) - 1;

// The highest policy version a trainer may set (Controller::set_policy_version):
// exact as a double, so the metrics gauge shows it as set.
inline constexpr int64_t kMaxPolicyVersion = (int64_t{1} << 53) - 1;

// Dimensions of a stored tensor.
inline constexpr size_t kMaxRank = 64;

// A remote insert carries its client's remaining time ("budget_ms",
// relative: clocks differ between machines); the controller refuses with
// kTimeout an insert it would start after that, so a client that gave up
// leaves no samples behind. Longer budgets are refused as bad input.
inline constexpr std::chrono::milliseconds kMaxInsertBudget = std::chrono::hours(24);

// The version of the wire protocol the services and clients speak: a client
// says hello with it before anything else and a storage unit registers with
// it; the controller refuses any other, so peers of two seqflow versions
// fail at once, naming both, instead of on the first message that changed
// between them. Raised with every change of a message.
// 2: waiting puts' tickets (a put's "full" answer carries one, `room` needs it).
// 3: samples placed in blocks (kPlacementBlock), puts in segments, a unit's
//    load names every part.
inline constexpr int64_t kWireProtocolVersion = 3;

// Remote mode places global indexes on the storage units in blocks of this
// many consecutive ones, block b on unit b % N (N units): a put's samples on
// one unit lie in runs, sent as frames of their own instead of packed into
// one (a copy), and the units hold a job's samples evenly to within a block.
// 64 rows of 32 KiB (a long response's 8,192 float32) make 2 MiB frames,
// which land in huge pages (16 rows' 512 KiB frames cost get 10-25% on 4 units).
inline constexpr size_t kPlacementBlock = 64;

}  // namespace seqflow
