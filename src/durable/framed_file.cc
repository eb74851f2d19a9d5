#include "durable/framed_file.h"

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

FramedFileWriter::FramedFileWriter(std::string path, const FileKind& kind) : file_(std::move(path)) {
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
