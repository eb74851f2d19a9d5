#include "durable/framed_file.h"

#include <sys/stat.h>

#include <cerrno>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>

#include "seqflow/error.h"

namespace seqflow::durable {
namespace {

constexpr std::string_view kMagicPrefix = "SEQF";

struct FrameHeader {
  std::array<char, 8> magic;
  uint32_t version;
  uint32_t zero;
};
static_assert(sizeof(FrameHeader) == kFrameHeaderSize);

std::string quoted(const std::string& path) { return "\"" + path + "\""; }

[[noreturn]] void fail(const std::string& path, const FileKind& kind, const std::string& problem) {
  throw_invalid(std::string(kind.name) + " " + quoted(path) + " " + problem);
}

}  // namespace

namespace {

// A checkpoint replaces only a file of its own kind: a path a peer named
// must never turn a service into a way to overwrite someone's files.
const std::string& replaceable(const std::string& path, const FileKind& kind) {
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) {
    if (errno == ENOENT) return path;
    throw_invalid("cannot write " + std::string(kind.name) + " " + quoted(path) + ": " + std::strerror(errno));
  }
  std::array<char, 8> magic{};
  std::ifstream in(path, std::ios::binary);
  const bool same_kind = S_ISREG(status.st_mode) && in.read(magic.data(), magic.size()) &&
                         std::string_view(magic.data(), magic.size()) == kind.magic;
  if (!same_kind) {
    throw_invalid("refusing to write " + std::string(kind.name) + " " + quoted(path) + ": a file that is not a " +
                  std::string(kind.name) + " is there, and a checkpoint never replaces one");
  }
  return path;
}

}  // namespace

FramedFileWriter::FramedFileWriter(std::string path, const FileKind& kind) : file_(replaceable(path, kind)) {
  FrameHeader header{{}, kind.version, 0};
  std::memcpy(header.magic.data(), kind.magic.data(), header.magic.size());
  write(std::as_bytes(std::span(&header, 1)));
}

void FramedFileWriter::write(std::span<const std::byte> bytes) {
  checksum_.update(bytes);
  file_.write(bytes);
  offset_ += bytes.size();
}

uint64_t FramedFileWriter::commit() {
  const uint64_t fingerprint = checksum_.value();
  file_.write(std::as_bytes(std::span(&fingerprint, 1)));
  file_.commit();
  return fingerprint;
}

FramedFile open_framed_file(const std::string& path, const FileKind& kind) {
  FramedFile file;
  file.bytes = read_file(path);
  const size_t size = file.bytes->size;
  FrameHeader header{};
  std::memcpy(&header, file.bytes->data, std::min(size, sizeof header));
  if (size < kind.magic.size() || std::string_view(header.magic.data(), header.magic.size()) != kind.magic) {
    fail(path, kind, "is not a seqflow " + std::string(kind.name) + " (bad magic)");
  }
  if (size < kFrameHeaderSize + kFrameTrailerSize) {
    fail(path, kind, "is truncated: " + std::to_string(size) + " bytes, less than an empty file");
  }
  if (header.version < kind.oldest_version || header.version > kind.version) {
    fail(path, kind,
         "has format version " + std::to_string(header.version) + "; this build reads versions " +
             std::to_string(kind.oldest_version) + " to " + std::to_string(kind.version));
  }
  if (header.zero != 0) fail(path, kind, "is corrupt: reserved header bytes are not zero");
  file.version = header.version;
  file.body_end = size - kFrameTrailerSize;
  std::memcpy(&file.fingerprint, file.bytes->data + file.body_end, sizeof file.fingerprint);
  return file;
}

void check_checksum(const FramedFile& file, const std::string& path, const FileKind& kind) {
  Checksum checksum;
  checksum.update(std::span(file.bytes->data, file.body_end));
  if (file.fingerprint != checksum.value()) fail(path, kind, "is corrupt: checksum mismatch");
}

std::optional<uint64_t> framed_file_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error(ErrorCode::kNotFound, "file " + quoted(path) + " does not exist or cannot be read");
  const auto size = static_cast<uint64_t>(in.tellg());
  if (size < kFrameHeaderSize + kFrameTrailerSize) return std::nullopt;
  FrameHeader header{};
  uint64_t trailer = 0;
  in.seekg(0);
  in.read(reinterpret_cast<char*>(&header), sizeof header);
  in.seekg(static_cast<std::streamoff>(size - kFrameTrailerSize));
  in.read(reinterpret_cast<char*>(&trailer), sizeof trailer);
  if (!in) throw_invalid("file " + quoted(path) + " cannot be read");
  if (std::string_view(header.magic.data(), kMagicPrefix.size()) != kMagicPrefix) return std::nullopt;
  return trailer;
}

}  // namespace seqflow::durable
