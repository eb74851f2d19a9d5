// Checkpoint files: a header with a checksum around the payload, written to
// path + ".tmp", synced and renamed, so a crash mid-save leaves the previous
// file intact and a damaged file is detected on load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace seqflow::core {

// Throws kNotFound when the directory does not exist, kInternal on I/O errors.
void write_checkpoint_file(const std::string& path, const std::vector<uint8_t>& payload);

// Throws kNotFound when the file does not exist, kInvalidArgument when it is
// not a checkpoint or is damaged (bad magic, length or checksum).
std::vector<uint8_t> read_checkpoint_file(const std::string& path);

// The checksum in the file's header, read without the payload: what tells
// one save's file from another's of the same size. Throws kNotFound when the
// file does not exist and kInvalidArgument when it is no controller checkpoint.
uint64_t checkpoint_file_fingerprint(const std::string& path);

}  // namespace seqflow::core
