#include "server/checkpoint_root.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <system_error>

#include "seqflow/error.h"

namespace seqflow::server {

namespace fs = std::filesystem;

namespace {

// The default root: made if missing, and trusted only if it is this user's
// alone (a directory someone else can write could be swapped for a symlink).
fs::path default_root() {
  const char* configured = std::getenv("SEQFLOW_CHECKPOINT_ROOT");
  if (configured && *configured) return configured;
  fs::path root;
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state) {
    root = fs::path(state) / "seqflow" / "checkpoints";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    root = fs::path(home) / ".local" / "state" / "seqflow" / "checkpoints";
  } else {
    throw_invalid("checkpoint_root is not set and there is no HOME for its default; name a directory");
  }
  std::error_code error;
  fs::create_directories(root, error);
  struct stat status {};
  if (error || ::stat(root.c_str(), &status) != 0 || !S_ISDIR(status.st_mode)) {
    throw_invalid("the default checkpoint_root '" + root.string() + "' cannot be made" +
                  (error ? ": " + error.message() : std::string()));
  }
  if (status.st_uid != ::geteuid() || (status.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw_invalid("the default checkpoint_root '" + root.string() +
                  "' must belong to this user and be writable by no one else; fix it or name another directory");
  }
  ::chmod(root.c_str(), status.st_mode & ~mode_t{S_IRWXG | S_IRWXO});
  return root;
}

}  // namespace

CheckpointRoot::CheckpointRoot(const std::string& given) {
  const fs::path directory = given.empty() ? default_root() : fs::path(given);
  std::error_code error;
  const fs::path root = fs::canonical(directory, error);
  if (error || !fs::is_directory(root, error)) {
    throw_invalid("checkpoint_root must be an existing directory, got '" + directory.string() + "'" +
                  (error ? ": " + error.message() : ""));
  }
  root_ = root;
}

std::string CheckpointRoot::resolve(const std::string& path, std::string_view what) const {
  if (path.empty()) throw_invalid(std::string(what) + ": the checkpoint path is empty");
  std::error_code error;
  // weakly_canonical resolves '..' and the symlinks of the part that exists,
  // so neither can lead out of the root.
  const fs::path resolved = fs::weakly_canonical(root_ / path, error);  // an absolute path replaces root_
  if (error) throw_invalid(std::string(what) + ": cannot resolve '" + path + "': " + error.message());
  const fs::path inside = resolved.lexically_relative(root_);
  if (inside.empty() || *inside.begin() == "..") {
    throw_invalid(std::string(what) + ": '" + path + "' lies outside the service's checkpoint root '" + root_.string() +
                  "' (--checkpoint-root)");
  }
  return resolved.string();
}

}  // namespace seqflow::server
