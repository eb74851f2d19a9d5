// Files that survive a crash: written under a temporary name, synced, renamed
// over the old one, and the rename itself synced (the directory entry), so a
// reader finds the old file or the whole new one, never a torn one.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "seqflow/tensor.h"

namespace seqflow::durable {

// Writes `path` + ".tmp"; commit() makes it `path` in one rename. Without
// commit() (an exception midway), the destructor removes the temporary file.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::span<const std::byte> bytes);
  void commit();

 private:
  void flush();
  void write_fully(std::span<const std::byte> bytes);
  [[noreturn]] void fail(const std::string& what, int error_number) const;

  std::string path_;
  std::string temporary_;
  int fd_ = -1;
  std::string pending_;  // small writes are gathered to avoid a syscall each
};

// Makes the entries of `directory` (renames, new files) durable. Throws
// kInternal naming the directory when it cannot be opened or synced; a file
// system that cannot sync directories at all (EINVAL) has nothing to make durable.
void sync_directory(const std::string& directory);

// The whole file in one buffer aligned for any dtype. A missing file throws
// kNotFound; anything but a readable regular file throws kInvalidArgument.
std::shared_ptr<const Buffer> read_file(const std::string& path);

}  // namespace seqflow::durable
