// The directory under which a service writes and reads the checkpoints its
// clients ask for (`--checkpoint-root`): a client may name no file outside
// it, so a caller cannot make the service overwrite or read arbitrary files.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace seqflow::server {

class CheckpointRoot {
 public:
  // Empty: anywhere the service's user may write. Otherwise an existing
  // directory; throws kInvalidArgument naming checkpoint_root otherwise.
  explicit CheckpointRoot(const std::string& directory);

  // `path` made absolute with its existing part's symlinks resolved; throws
  // kInvalidArgument naming `what`, the path and the root when it lies
  // outside the root.
  std::string resolve(const std::string& path, std::string_view what) const;

 private:
  std::filesystem::path root_;  // canonical; empty: anywhere
};

}  // namespace seqflow::server
