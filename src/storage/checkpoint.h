// The storage checkpoint file: every stored (global index, field) value,
// each version held.
//
// Format (version 4, little-endian), inside durable's frame (framed_file.h:
// magic "SEQFSTOR", version, checksum trailer):
//   body     u64 record count, then the records
//   record   i64 global index | u64 nbytes | u32 field length | u32 rank |
//            u8 dtype | u8 is_object | 6 zero bytes |
//            u64 generation | u32 partition length | u32 zero |
//            u64 version | u8 committed | 7 zero bytes |
//            field | partition | rank x i64 dims |
//            zero padding to a 64-byte file offset | nbytes of payload
// Older versions are still read. Version 3 is the same format, saved before
// remote mode placed samples in blocks (a unit's part of a remote checkpoint
// then held samples gi % N: StorageUnit::load_part picks its own out of
// every part). Version 2 has no version line: each value
// loads as committed version 0. Version 1 has no generation and partition
// either: its values load with generation 0 and no partition, which any
// BatchMeta may read.
// Payloads start at 64-byte offsets so that the views of a loaded file are as
// aligned as those of a fresh put.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "seqflow/tensor.h"

namespace seqflow {

struct StoredValue {
  int64_t global_index = 0;
  uint64_t generation = 0;
  std::string partition;
  std::string field;
  uint64_t version = 0;   // the write's (seqflow/field_versions.h)
  bool committed = true;  // false: staged beside the committed one
  SampleView view;
};

// Atomic: the file at `path` is the old one or the whole new one.
void write_checkpoint(const std::string& path, std::span<const StoredValue> values);

// Every record, validated (structure, dtype, shape vs bytes, checksum), as
// views into one buffer holding the file. Throws kNotFound when the file does
// not exist and kInvalidArgument naming the path and the first problem.
// `placed_in_blocks` (when given) tells whether the file was saved since
// remote mode placed samples in blocks (format version 4 on).
std::vector<StoredValue> read_checkpoint(const std::string& path, bool* placed_in_blocks = nullptr);

}  // namespace seqflow
