// Checkpoint directories: write beside, sync, swap with one rename.
#include "durable/checkpoint_directory.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "common/json_text.h"
#include "durable/atomic_file.h"
#include "durable/checksum.h"
#include "durable/framed_file.h"
#include "seqflow/error.h"
#include "seqflow/limits.h"

namespace seqflow::durable {
namespace {

namespace fs = std::filesystem;

constexpr const char* kManifestName = "manifest.json";
constexpr const char* kControllerName = "controller.ckpt";
constexpr const char* kStorageName = "storage.ckpt";
constexpr const char* kMetadataName = "metadata.json";
constexpr const char* kFormat = "seqflow-checkpoint";
// Version 2 records each file's fingerprint; version 1 manifests (without)
// still load, unchecked.
constexpr int kVersion = 2;
constexpr int kOldestVersion = 1;

std::string in_quotes(const fs::path& path) { return "\"" + path.string() + "\""; }

[[noreturn]] void fail_io(const std::string& what, const fs::path& path, int error_number) {
  throw Error(ErrorCode::kInternal,
              "checkpoint: cannot " + what + " " + in_quotes(path) + ": " + std::strerror(error_number));
}

// "a/b/" and "a/b" name the same directory.
fs::path normalized(const std::string& directory) {
  if (directory.empty()) throw_invalid("checkpoint directory is empty; give a path");
  fs::path path = fs::path(directory).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();
  if (path.empty() || path.filename() == "." || path.filename() == "..") {
    throw_invalid("checkpoint directory " + in_quotes(directory) + " must name a directory of its own");
  }
  return path;
}

fs::path parent_of(const fs::path& path) { return path.has_parent_path() ? path.parent_path() : fs::path("."); }

fs::path temporary_sibling(const fs::path& directory, const char* kind) {
  static std::atomic<uint64_t> counter{0};
  return parent_of(directory) / ("." + directory.filename().string() + ".seqflow-" + kind + "-" +
                                 std::to_string(::getpid()) + "-" + std::to_string(counter++));
}

// What tells one save's file from another's of the same size, without
// reading a large file whole: the checksum framed files carry. Small files
// (metadata.json; the index of a sharded save, which holds its units'
// fingerprints) are checksummed here.
uint64_t fingerprint_of(const fs::path& path) {
  if (const auto carried = framed_file_fingerprint(path.string())) return *carried;
  const std::shared_ptr<const Buffer> bytes = read_file(path.string());
  Checksum checksum;
  checksum.update(std::span<const std::byte>(bytes->data, bytes->size));
  return checksum.value();
}

Value file_entry(const fs::path& path) {
  return {{"name", path.filename().string()},
          {"bytes", static_cast<uint64_t>(fs::file_size(path))},
          {"fingerprint", fingerprint_of(path)}};
}

void write_text(const fs::path& path, const std::string& text) {
  AtomicFileWriter writer(path.string());
  writer.write(std::as_bytes(std::span(text.data(), text.size())));
  writer.commit();
}

// TransferQueue's metadata.json: the data is always saved with the rest.
void write_metadata(const fs::path& directory, const Value& user_metadata) {
  const Value content{{"storage_saved", true}, {"user_metadata", user_metadata}};
  write_text(directory / kMetadataName, json_text(content, 2) + "\n");
}

void write_manifest(const fs::path& directory) {
  const Value manifest{
      {"format", kFormat},
      {"version", kVersion},
      {"files", Value{{"controller", file_entry(directory / kControllerName)},
                      {"storage", file_entry(directory / kStorageName)},
                      {"metadata", file_entry(directory / kMetadataName)}}},
  };
  write_text(directory / kManifestName, json_text(manifest, 2) + "\n");
}

// An existing target is replaced only when it is a checkpoint or empty.
void check_replaceable(const fs::path& directory) {
  std::error_code error;
  const fs::file_status status = fs::symlink_status(directory, error);
  if (!fs::exists(status)) return;
  if (!fs::is_directory(status)) {
    throw_invalid("checkpoint directory " + in_quotes(directory) + " exists and is not a directory");
  }
  if (fs::exists(directory / kManifestName) || fs::is_empty(directory)) return;
  throw_invalid("checkpoint directory " + in_quotes(directory) + " exists and is not a seqflow checkpoint (no " +
                kManifestName + "); refusing to replace it");
}

// Makes `fresh` the directory `target`, atomically when `target` exists too.
void swap_into_place(const fs::path& fresh, const fs::path& target) {
  if (!fs::exists(fs::symlink_status(target))) {
    if (::rename(fresh.c_str(), target.c_str()) != 0) fail_io("rename into", target, errno);
    return;
  }
  if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(fresh);  // now holds the previous checkpoint
    return;
  }
  const int error_number = errno;
  if (error_number != EINVAL && error_number != ENOSYS && error_number != ENOTSUP) {
    fail_io("swap into", target, error_number);
  }
  // File systems without an atomic exchange: two renames. A crash between
  // them leaves the previous checkpoint whole under `previous`.
  const fs::path previous = temporary_sibling(target, "previous");
  if (::rename(target.c_str(), previous.c_str()) != 0) fail_io("move aside", target, errno);
  if (::rename(fresh.c_str(), target.c_str()) != 0) {
    const int rename_error = errno;
    ::rename(previous.c_str(), target.c_str());
    fail_io("rename into", target, rename_error);
  }
  fs::remove_all(previous);
}

// A member holding a non-negative integer, or nullptr.
const Value* unsigned_member(const Value& entry, std::string_view key) {
  const Value* member = entry.find(key);
  if (member == nullptr || !member->is_integer() || (member->type() == Value::Type::kInt && member->as_int() < 0)) {
    return nullptr;
  }
  return member;
}

void check_file(const fs::path& directory, const Value& entry, const char* role, const char* expected_name,
                bool fingerprinted) {
  const Value* name = entry.find("name");
  if (name == nullptr || *name != Value(expected_name) || unsigned_member(entry, "bytes") == nullptr ||
      (fingerprinted && unsigned_member(entry, "fingerprint") == nullptr)) {
    throw_invalid("checkpoint " + in_quotes(directory) + ": manifest entry of the " + role + " file is malformed");
  }
  const fs::path path = directory / expected_name;
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  if (error) {
    throw_invalid("checkpoint " + in_quotes(directory) + " is incomplete: " + role + " file " + in_quotes(path) +
                  " is missing or unreadable");
  }
  const uint64_t expected = entry.at("bytes").as_uint();
  if (size != expected) {
    throw_invalid("checkpoint " + in_quotes(directory) + " is corrupt: " + role + " file " + in_quotes(path) +
                  " holds " + std::to_string(size) + " bytes, the manifest says " + std::to_string(expected));
  }
  // Same size, another save's file (copied over, or left by an interrupted
  // copy): custom_meta of one save and tensors of another must not load.
  if (fingerprinted) {
    const uint64_t found = fingerprint_of(path);
    const uint64_t recorded = entry.at("fingerprint").as_uint();
    if (found != recorded) {
      throw_invalid("checkpoint " + in_quotes(directory) + " mixes saves: its " + role + " file " + in_quotes(path) +
                    " is not the one its manifest was saved with (fingerprint " + std::to_string(found) +
                    ", the manifest says " + std::to_string(recorded) + ")");
    }
  }
}

// The JSON value of a manifest or metadata file; null when it is not JSON
// (the callers name the file as corrupt).
Value parsed_json(const std::string& text) {
  try {
    return parse_json_text(text, kMaxDecodeNesting);
  } catch (const Error&) {
    return Value();
  }
}

CheckpointFiles files_in(const fs::path& directory) {
  return {(directory / kControllerName).string(), (directory / kStorageName).string(),
          (directory / kMetadataName).string()};
}

}  // namespace

std::string temporary_checkpoint_sibling(const std::string& directory, const char* kind) {
  return temporary_sibling(normalized(directory), kind).string();
}

void write_checkpoint_directory(const std::string& directory, const Value& user_metadata,
                                const std::function<void(const CheckpointFiles&)>& write) {
  const fs::path target = normalized(directory);
  if (!user_metadata.is_object()) {
    throw_invalid("checkpoint metadata must be a JSON object (a dict), got " + std::string(user_metadata.type_name()));
  }
  check_replaceable(target);
  std::error_code error;
  fs::create_directories(parent_of(target), error);
  if (error) {
    throw_invalid("checkpoint directory " + in_quotes(target) + ": cannot create its parent: " + error.message());
  }
  const fs::path fresh = temporary_sibling(target, "saving");
  if (!fs::create_directory(fresh, error) || error) {
    throw_invalid("checkpoint directory " + in_quotes(target) + ": cannot create " + in_quotes(fresh) + ": " +
                  (error ? error.message() : std::string("it exists")));
  }
  try {
    write_metadata(fresh, user_metadata);
    write(files_in(fresh));
    write_manifest(fresh);  // last: its presence means the directory is whole
    sync_directory(fresh.string());
    swap_into_place(fresh, target);
    sync_directory(parent_of(target).string());
  } catch (...) {
    fs::remove_all(fresh, error);
    throw;
  }
}

CheckpointFiles open_checkpoint_directory(const std::string& directory) {
  const fs::path path = normalized(directory);
  std::error_code error;
  if (!fs::exists(path, error)) {
    throw Error(ErrorCode::kNotFound, "checkpoint directory " + in_quotes(path) + " does not exist");
  }
  if (!fs::is_directory(path, error)) {
    throw_invalid("checkpoint " + in_quotes(path) + " is not a directory");
  }
  const fs::path manifest_path = path / kManifestName;
  std::ifstream in(manifest_path);
  if (!in) {
    throw Error(ErrorCode::kNotFound, "no checkpoint in " + in_quotes(path) + ": " + kManifestName +
                                          " is missing (a seqflow checkpoint holds " + kManifestName + ", " +
                                          kMetadataName + ", " + kControllerName + " and " + kStorageName + ")");
  }
  std::stringstream text;
  text << in.rdbuf();
  const Value manifest = parsed_json(text.str());
  const Value* format = manifest.find("format");
  const Value* files = manifest.find("files");
  if (format == nullptr || *format != Value(kFormat) || files == nullptr || !files->is_object()) {
    throw_invalid("checkpoint " + in_quotes(path) + " is corrupt: " + kManifestName +
                  " is not a seqflow checkpoint manifest");
  }
  const Value* found_version = manifest.find("version");
  const Value version = found_version == nullptr ? Value() : *found_version;
  if (version.type() != Value::Type::kInt || version.as_int() < kOldestVersion || version.as_int() > kVersion) {
    throw_invalid("checkpoint " + in_quotes(path) + " has format version " + version.dump() +
                  "; this build reads versions " + std::to_string(kOldestVersion) + " to " + std::to_string(kVersion));
  }
  const bool fingerprinted = version.as_int() >= 2;
  const auto entry = [&](std::string_view role) { return files->contains(role) ? files->at(role) : Value(); };
  check_file(path, entry("controller"), "controller", kControllerName, fingerprinted);
  check_file(path, entry("storage"), "storage", kStorageName, fingerprinted);
  CheckpointFiles out = files_in(path);
  if (files->contains("metadata")) {
    check_file(path, files->at("metadata"), "metadata", kMetadataName, fingerprinted);
  } else {
    out.metadata.clear();  // saved before metadata.json existed
  }
  return out;
}

Value read_checkpoint_metadata(const CheckpointFiles& files) {
  if (files.metadata.empty()) return Value::object();
  std::ifstream in(files.metadata);
  std::stringstream text;
  text << in.rdbuf();
  const Value content = parsed_json(text.str());
  const Value* user_metadata = content.find("user_metadata");
  if (!in || user_metadata == nullptr || !user_metadata->is_object()) {
    throw_invalid("checkpoint file " + in_quotes(files.metadata) +
                  " is corrupt: it must be a JSON object whose user_metadata is an object");
  }
  return *user_metadata;
}

}  // namespace seqflow::durable
