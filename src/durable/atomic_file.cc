#include "durable/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "seqflow/error.h"
#include "common/aligned_buffer.h"

namespace seqflow::durable {
namespace {

constexpr size_t kGatherLimit = 1 << 20;  // writes below this are gathered first

std::string describe_errno(int error_number) { return std::strerror(error_number); }

std::string parent_directory(const std::string& path) {
  const std::string directory = std::filesystem::path(path).parent_path().string();
  return directory.empty() ? "." : directory;
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)), temporary_(path_ + ".tmp") {
  // A new file, never one that is there (a leftover is removed first): a
  // symlink planted at the temporary name must not redirect the write.
  ::unlink(temporary_.c_str());
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int error_number = errno;
    // A missing or unwritable directory is the caller's bad path, not a fault.
    if (error_number == ENOENT || error_number == ENOTDIR || error_number == EACCES || error_number == EISDIR) {
      throw_invalid("cannot write checkpoint \"" + path_ + "\": " + describe_errno(error_number));
    }
    fail("open", error_number);
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temporary_.c_str());
  }
}

void AtomicFileWriter::fail(const std::string& what, int error_number) const {
  throw Error(ErrorCode::kInternal, "cannot write checkpoint \"" + path_ + "\" (" + what + " of \"" + temporary_ +
                                        "\"): " + describe_errno(error_number));
}

void AtomicFileWriter::write_fully(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd_, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      fail("write", errno);
    }
    bytes = bytes.subspan(static_cast<size_t>(written));
  }
}

void AtomicFileWriter::flush() {
  write_fully(std::as_bytes(std::span(pending_.data(), pending_.size())));
  pending_.clear();
}

void AtomicFileWriter::write(std::span<const std::byte> bytes) {
  if (bytes.empty()) return;
  if (pending_.size() + bytes.size() <= kGatherLimit) {
    pending_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return;
  }
  flush();
  write_fully(bytes);
}

void AtomicFileWriter::commit() {
  flush();
  if (::fsync(fd_) != 0) fail("fsync", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int error_number = errno;
    ::unlink(temporary_.c_str());
    fail("close", error_number);
  }
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
    const int error_number = errno;
    ::unlink(temporary_.c_str());
    fail("rename", error_number);
  }
  sync_directory(parent_directory(path_));
}

void sync_directory(const std::string& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    throw Error(ErrorCode::kInternal,
                "cannot open directory \"" + directory + "\" to sync it: " + describe_errno(errno));
  }
  const int result = ::fsync(fd);
  const int error_number = errno;
  ::close(fd);
  if (result != 0 && error_number != EINVAL) {
    throw Error(ErrorCode::kInternal, "cannot sync directory \"" + directory + "\": " + describe_errno(error_number));
  }
}

std::shared_ptr<const Buffer> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error_number = errno;
    if (error_number == ENOENT) {
      throw Error(ErrorCode::kNotFound, "checkpoint \"" + path + "\" does not exist");
    }
    throw_invalid("cannot read checkpoint \"" + path + "\": " + describe_errno(error_number));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    throw_invalid("cannot read checkpoint \"" + path + "\": not a regular file");
  }
  WritableBuffer out = allocate_buffer(static_cast<size_t>(info.st_size));
  size_t done = 0;
  while (done < out.buffer->size) {
    const ssize_t got = ::pread(fd, out.data + done, out.buffer->size - done, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw_invalid("cannot read checkpoint \"" + path + "\": " + describe_errno(errno));
    if (got == 0) throw_invalid("checkpoint \"" + path + "\" shrank while being read");
    done += static_cast<size_t>(got);
  }
  return std::move(out.buffer);
}

}  // namespace seqflow::durable
