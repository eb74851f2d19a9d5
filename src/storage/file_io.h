// Files written atomically (temporary name, fsync, rename) and read whole
// into one aligned buffer.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "seqflow/tensor.h"

namespace seqflow {

// Writes `path` + ".tmp"; commit() makes it `path` in one rename, so readers
// see the old file or the whole new one. Without commit() (an exception
// midway), the destructor removes the temporary file.
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

// The whole file in one buffer aligned for any dtype. A missing file throws
// kNotFound; anything but a readable regular file throws kInvalidArgument.
std::shared_ptr<const Buffer> read_file(const std::string& path);

}  // namespace seqflow
