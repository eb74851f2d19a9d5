// A checkpoint directory: the controller file, the storage file and a
// manifest naming both with their sizes and fingerprints (so files of two
// saves are never loaded together), replaced as one unit. A save writes a sibling
// temporary directory, syncs it and swaps it in with one rename, so a crash
// at any point leaves the previous checkpoint whole; a directory without its
// manifest is never taken for a checkpoint.
#pragma once

#include <functional>
#include <string>

#include "seqflow/value.h"

namespace seqflow::durable {

struct CheckpointFiles {
  std::string controller;  // paths inside the directory
  std::string storage;
  // metadata.json in TransferQueue's layout ({"storage_saved": true,
  // "user_metadata": {...}}); empty for checkpoints saved before it existed.
  std::string metadata;
};

// Writes metadata.json holding `user_metadata` (a JSON object), calls
// `write` with the file paths of a fresh temporary directory, then makes that
// directory `directory` atomically. An existing `directory` must be a
// checkpoint (or empty): anything else is refused, never overwritten. On
// failure the temporary directory is removed and `directory` is untouched.
void write_checkpoint_directory(const std::string& directory, const Value& user_metadata,
                                const std::function<void(const CheckpointFiles&)>& write);

// The files of the checkpoint in `directory`, after checking that the
// manifest is valid and the files exist with the sizes and fingerprints it
// records. Throws
// kNotFound when there is no checkpoint there (no directory, or one without
// a manifest), kInvalidArgument when it is incomplete or corrupt.
CheckpointFiles open_checkpoint_directory(const std::string& directory);

// The user metadata saved with the checkpoint; {} when it has none.
Value read_checkpoint_metadata(const CheckpointFiles& files);

// A fresh hidden path beside checkpoint `directory` for a temporary file of
// kind `kind` (".NAME.seqflow-KIND-PID-N"): where a save writes, so where a
// service with a checkpoint root may write too.
std::string temporary_checkpoint_sibling(const std::string& directory, const char* kind);

}  // namespace seqflow::durable
