#include "server/checkpoint_root.h"

#include <system_error>

#include "seqflow/error.h"

namespace seqflow::server {

namespace fs = std::filesystem;

CheckpointRoot::CheckpointRoot(const std::string& directory) {
  if (directory.empty()) return;
  std::error_code error;
  const fs::path root = fs::canonical(directory, error);
  if (error || !fs::is_directory(root, error)) {
    throw_invalid("checkpoint_root must be an existing directory, got '" + directory + "'" +
                  (error ? ": " + error.message() : ""));
  }
  root_ = root;
}

std::string CheckpointRoot::resolve(const std::string& path, std::string_view what) const {
  if (path.empty()) throw_invalid(std::string(what) + ": the checkpoint path is empty");
  std::error_code error;
  // weakly_canonical resolves '..' and the symlinks of the part that exists,
  // so neither can lead out of the root.
  const fs::path resolved = fs::weakly_canonical(fs::absolute(path), error);
  if (error) throw_invalid(std::string(what) + ": cannot resolve '" + path + "': " + error.message());
  if (root_.empty()) return resolved.string();
  const fs::path inside = resolved.lexically_relative(root_);
  if (inside.empty() || *inside.begin() == "..") {
    throw_invalid(std::string(what) + ": '" + path + "' lies outside the service's checkpoint root '" + root_.string() +
                  "' (--checkpoint-root)");
  }
  return resolved.string();
}

}  // namespace seqflow::server
