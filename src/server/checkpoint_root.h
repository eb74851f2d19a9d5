// The directory under which a service writes and reads the checkpoints its
// clients ask for (`--checkpoint-root`, or a default the service owns): a
// client may name no file outside it, so a caller cannot make the service
// write or read arbitrary files.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace seqflow::server {

class CheckpointRoot {
 public:
  // An existing directory; throws kInvalidArgument naming checkpoint_root
  // otherwise. Empty: the default, $SEQFLOW_CHECKPOINT_ROOT if set, else
  // $XDG_STATE_HOME/seqflow/checkpoints (~/.local/state/seqflow/checkpoints),
  // made (mode 0700) if missing; it must belong to the service's user and be
  // writable by no one else.
  explicit CheckpointRoot(const std::string& directory);

  const std::filesystem::path& directory() const { return root_; }

  // `path` made absolute (a relative path is taken under the root) with its
  // existing part's symlinks resolved; throws kInvalidArgument naming `what`,
  // the path and the root when it lies outside the root.
  std::string resolve(const std::string& path, std::string_view what) const;

 private:
  std::filesystem::path root_;  // canonical
};

}  // namespace seqflow::server
