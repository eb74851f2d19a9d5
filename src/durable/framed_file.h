// The one frame of every checkpoint file seqflow writes (controller, storage
// unit; KV state travels inside the controller's):
//   header   8-byte magic naming the kind | u32 format version | u32 zero
//   body     the kind's own format
//   trailer  u64 Checksum of every byte before it
// written atomically (atomic_file.h). The trailer doubles as the file's
// fingerprint: what tells one save's file from another's of the same size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "durable/atomic_file.h"
#include "durable/checksum.h"
#include "seqflow/tensor.h"

namespace seqflow::durable {

inline constexpr size_t kFrameHeaderSize = 16;
inline constexpr size_t kFrameTrailerSize = 8;

struct FileKind {
  std::string_view magic;   // 8 bytes, starting "SEQF"
  std::string_view name;    // in errors: "storage checkpoint"
  uint32_t version;         // what this build writes
  uint32_t oldest_version;  // the oldest it still reads
};

class FramedFileWriter {
 public:
  FramedFileWriter(std::string path, const FileKind& kind);  // writes the header

  void write(std::span<const std::byte> bytes);
  // Bytes written so far, header included: bodies that align to file offsets need it.
  uint64_t offset() const { return offset_; }
  // Trailer, sync, rename; returns the fingerprint.
  uint64_t commit();

 private:
  AtomicFileWriter file_;
  Checksum checksum_;
  uint64_t offset_ = 0;
};

struct FramedFile {
  std::shared_ptr<const Buffer> bytes;  // the whole file; the body is [kFrameHeaderSize, body_end)
  uint32_t version = 0;
  size_t body_end = 0;
  uint64_t fingerprint = 0;
};

// The file with its frame checked: kNotFound when it does not exist;
// kInvalidArgument naming the path when it is not of `kind`, has a version
// this build does not read or is too short for a frame.
FramedFile open_framed_file(const std::string& path, const FileKind& kind);

// kInvalidArgument naming the path when the body fails its checksum.
void check_checksum(const FramedFile& file, const std::string& path, const FileKind& kind);

// Opens the file, hands it to `decode`, then checks the checksum: a damaged
// body is named by what the decoder finds wrong first (more telling than
// "checksum mismatch"), and only a file whose checksum holds is decoded.
template <typename Decode>
auto read_framed_file(const std::string& path, const FileKind& kind, Decode&& decode) {
  const FramedFile file = open_framed_file(path, kind);
  auto decoded = decode(file);
  check_checksum(file, path, kind);
  return decoded;
}

// The trailer of a framed file of any kind, read without the body; null when
// the file carries no frame. Throws kNotFound when it does not exist.
std::optional<uint64_t> framed_file_fingerprint(const std::string& path);

}  // namespace seqflow::durable
