#include "core/checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>

#include "seqflow/error.h"

namespace seqflow::core {
namespace {

constexpr std::string_view kMagic = "SQFCTRL1";
constexpr size_t kHeaderSize = 8 + 8 + 8;  // magic, payload size, FNV-1a 64

uint64_t fnv1a(const uint8_t* data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

void put_u64(std::vector<uint8_t>& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

uint64_t get_u64(const uint8_t* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

[[noreturn]] void fail_io(const std::string& what, const std::string& path, int error) {
  throw Error(error == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInternal,
              what + " '" + path + "': " + std::strerror(error));
}

void write_all(int fd, const uint8_t* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      fail_io("cannot write checkpoint", path, error);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

std::string directory_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void write_checkpoint_file(const std::string& path, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> header(kMagic.begin(), kMagic.end());
  put_u64(header, payload.size());
  put_u64(header, fnv1a(payload.data(), payload.size()));

  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_io("cannot create checkpoint", tmp, errno);
  write_all(fd, header.data(), header.size(), tmp);
  write_all(fd, payload.data(), payload.size(), tmp);
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    fail_io("cannot sync checkpoint", tmp, error);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    fail_io("cannot rename checkpoint to", path, error);
  }
  // The rename itself must reach the disk.
  const int dir = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

std::vector<uint8_t> read_checkpoint_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) {
      throw Error(ErrorCode::kNotFound, "checkpoint '" + path + "' does not exist");
    }
    fail_io("cannot open checkpoint", path, error);
  }
  std::vector<uint8_t> bytes;
  uint8_t buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      fail_io("cannot read checkpoint", path, error);
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buffer, buffer + n);
  }
  ::close(fd);
  auto corrupt = [&](const std::string& why) {
    throw_invalid("checkpoint '" + path + "' is corrupt: " + why);
  };
  if (bytes.size() < kHeaderSize || std::string_view(reinterpret_cast<const char*>(bytes.data()), 8) != kMagic) {
    corrupt("not a seqflow controller checkpoint");
  }
  const uint64_t size = get_u64(bytes.data() + 8);
  if (size != bytes.size() - kHeaderSize) {
    corrupt("payload is " + std::to_string(bytes.size() - kHeaderSize) + " bytes, header says " +
            std::to_string(size));
  }
  if (fnv1a(bytes.data() + kHeaderSize, size) != get_u64(bytes.data() + 16)) {
    corrupt("checksum mismatch");
  }
  return {bytes.begin() + kHeaderSize, bytes.end()};
}

uint64_t checkpoint_file_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kNotFound, "checkpoint '" + path + "' does not exist or cannot be read");
  uint8_t header[kHeaderSize];
  in.read(reinterpret_cast<char*>(header), sizeof header);
  if (!in || std::string_view(reinterpret_cast<const char*>(header), kMagic.size()) != kMagic) {
    throw_invalid("checkpoint '" + path + "' is not a seqflow controller checkpoint");
  }
  return get_u64(header + 16);
}

}  // namespace seqflow::core
