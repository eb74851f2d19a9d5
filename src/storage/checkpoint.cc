// Writing and validating storage checkpoint files (format in checkpoint.h).
#include "storage/checkpoint.h"

#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <type_traits>

#include "seqflow/error.h"
#include "storage/checksum.h"
#include "storage/dtype_code.h"
#include "storage/file_io.h"
#include "storage/value_check.h"

namespace seqflow {
namespace {

static_assert(std::endian::native == std::endian::little,
              "checkpoints are written in host order; a big-endian host needs byte swapping");

constexpr std::array<char, 8> kMagic = {'S', 'E', 'Q', 'F', 'S', 'T', 'O', 'R'};
constexpr uint32_t kVersion = 2;
constexpr uint32_t kVersionWithoutOwners = 1;
constexpr size_t kPayloadAlignment = 64;

struct FileHeader {
  std::array<char, 8> magic;
  uint32_t version;
  uint32_t zero;
  uint64_t records;
};

struct RecordHeader {
  int64_t global_index;
  uint64_t nbytes;
  uint32_t field_size;
  uint32_t rank;
  uint8_t dtype;
  uint8_t is_object;
  std::array<uint8_t, 6> zero;
};

// Version 2: whose value it is (see StoredValue).
struct OwnerHeader {
  uint64_t generation;
  uint32_t partition_size;
  uint32_t zero;
};

static_assert(sizeof(FileHeader) == 24 && std::is_trivially_copyable_v<FileHeader>);
static_assert(sizeof(OwnerHeader) == 16 && std::is_trivially_copyable_v<OwnerHeader>);
static_assert(sizeof(RecordHeader) == 32 && std::is_trivially_copyable_v<RecordHeader>);
constexpr size_t kTrailerSize = sizeof(uint64_t);
constexpr size_t kMinRecordSize = sizeof(RecordHeader) + 1;  // a field name has a byte at least

size_t padding_after(size_t offset) {
  return (kPayloadAlignment - offset % kPayloadAlignment) % kPayloadAlignment;
}

template <typename T>
std::span<const std::byte> bytes_of(const T& value) {
  return std::as_bytes(std::span(&value, 1));
}

// Everything written goes through the checksum, except the trailer itself.
class Encoder {
 public:
  explicit Encoder(const std::string& path) : file_(path) {}

  void put(std::span<const std::byte> bytes) {
    checksum_.update(bytes);
    file_.write(bytes);
    offset_ += bytes.size();
  }

  void pad() {
    static constexpr std::array<std::byte, kPayloadAlignment> kZeros{};
    put(std::span(kZeros).first(padding_after(offset_)));
  }

  void finish() {
    const uint64_t sum = checksum_.value();
    file_.write(bytes_of(sum));
    file_.commit();
  }

 private:
  AtomicFileWriter file_;
  Checksum checksum_;
  size_t offset_ = 0;
};

class Decoder {
 public:
  Decoder(const std::string& path, std::shared_ptr<const Buffer> file)
      : path_(path), file_(std::move(file)) {}

  std::vector<StoredValue> decode() {
    const size_t size = file_->size;
    if (size < kMagic.size() || std::memcmp(file_->data, kMagic.data(), kMagic.size()) != 0) {
      fail("is not a seqflow storage checkpoint (bad magic)");
    }
    if (size < sizeof(FileHeader) + kTrailerSize) {
      fail("is truncated: " + std::to_string(size) + " bytes, less than an empty checkpoint");
    }
    end_ = size - kTrailerSize;
    const auto header = take<FileHeader>("the header");
    if (header.version != kVersion && header.version != kVersionWithoutOwners) {
      fail("has version " + std::to_string(header.version) + "; this build reads versions " +
           std::to_string(kVersionWithoutOwners) + " and " + std::to_string(kVersion));
    }
    with_owners_ = header.version == kVersion;
    if (header.zero != 0) fail("is corrupt: reserved header bytes are not zero");
    if (header.records > (end_ - offset_) / kMinRecordSize) {
      fail("is corrupt or truncated: " + std::to_string(header.records) +
           " records cannot fit in " + std::to_string(size) + " bytes");
    }
    std::vector<StoredValue> values;
    values.reserve(header.records);
    for (record_ = 0; record_ < header.records; ++record_) values.push_back(decode_record());
    if (offset_ != end_) {
      fail("is corrupt: " + std::to_string(end_ - offset_) +
           " unexpected bytes after the last record");
    }
    check_sum();
    return values;
  }

 private:
  StoredValue decode_record() {
    const auto header = take<RecordHeader>("the record header");
    if (header.zero != decltype(header.zero){}) fail_record("reserved bytes are not zero");
    if (header.field_size == 0) fail_record("the field name is empty");
    // Checked before the shape is allocated: a corrupt rank must not drive a huge allocation.
    if (header.rank > kMaxRank) {
      fail_record("rank " + std::to_string(header.rank) + " exceeds " + std::to_string(kMaxRank));
    }
    if (!is_dtype_code(header.dtype)) {
      fail_record("unknown dtype code " + std::to_string(header.dtype));
    }
    if (header.is_object > 1) fail_record("is_object is " + std::to_string(header.is_object));
    if (header.global_index < 0) {
      fail_record("negative global index " + std::to_string(header.global_index));
    }

    StoredValue value;
    value.global_index = header.global_index;
    const auto owner = with_owners_ ? take<OwnerHeader>("the owner header") : OwnerHeader{0, 0, 0};
    if (owner.zero != 0) fail_record("reserved owner bytes are not zero");
    value.generation = owner.generation;
    const auto field = take_bytes(header.field_size, "the field name");
    value.field.assign(reinterpret_cast<const char*>(field.data()), field.size());
    const auto partition = take_bytes(owner.partition_size, "the partition name");
    value.partition.assign(reinterpret_cast<const char*>(partition.data()), partition.size());
    value.view.shape.resize(header.rank);
    for (int64_t& dim : value.view.shape) dim = take<int64_t>("the shape");
    take_bytes(padding_after(offset_), "the payload padding");
    const size_t payload_offset = offset_;
    take_bytes(header.nbytes, "the payload");

    value.view.buffer = file_;
    value.view.offset = payload_offset;
    value.view.nbytes = header.nbytes;
    value.view.dtype = static_cast<DType>(header.dtype);
    value.view.is_object = header.is_object == 1;
    if (auto problem = value_problem(value.view.dtype, value.view.is_object, value.view.shape,
                                     value.view.nbytes)) {
      fail_record("field \"" + value.field + "\" of global index " +
                  std::to_string(value.global_index) + ": " + *problem);
    }
    return value;
  }

  std::span<const std::byte> take_bytes(uint64_t n, const char* what) {
    if (n > end_ - offset_) {
      const std::string where = record_ == kNoRecord ? "" : " of record " + std::to_string(record_);
      fail("is truncated (or corrupt): " + std::string(what) + where + " needs " +
           std::to_string(n) + " bytes at offset " + std::to_string(offset_) + ", " +
           std::to_string(end_ - offset_) + " remain before the checksum");
    }
    std::span<const std::byte> out(file_->data + offset_, n);
    offset_ += n;
    return out;
  }

  template <typename T>
  T take(const char* what) {
    T value;
    std::memcpy(&value, take_bytes(sizeof(T), what).data(), sizeof(T));
    return value;
  }

  void check_sum() const {
    Checksum checksum;
    checksum.update(std::span(file_->data, end_));
    uint64_t stored;
    std::memcpy(&stored, file_->data + end_, sizeof stored);
    if (stored != checksum.value()) fail("is corrupt: checksum mismatch");
  }

  [[noreturn]] void fail_record(const std::string& problem) const {
    fail("is corrupt: record " + std::to_string(record_) + ": " + problem);
  }

  [[noreturn]] void fail(const std::string& problem) const {
    throw_invalid("checkpoint \"" + path_ + "\" " + problem);
  }

  const std::string& path_;
  std::shared_ptr<const Buffer> file_;
  size_t end_ = 0;
  size_t offset_ = 0;
  static constexpr uint64_t kNoRecord = UINT64_MAX;  // still in the file header
  uint64_t record_ = kNoRecord;
  bool with_owners_ = true;
};

}  // namespace

void write_checkpoint(const std::string& path, std::span<const StoredValue> values) {
  Encoder out(path);
  FileHeader header{kMagic, kVersion, 0, values.size()};
  out.put(bytes_of(header));
  for (const StoredValue& value : values) {
    const SampleView& view = value.view;
    RecordHeader record{value.global_index,
                        view.nbytes,
                        static_cast<uint32_t>(value.field.size()),
                        static_cast<uint32_t>(view.shape.size()),
                        static_cast<uint8_t>(view.dtype),
                        static_cast<uint8_t>(view.is_object ? 1 : 0),
                        {}};
    out.put(bytes_of(record));
    const OwnerHeader owner{value.generation, static_cast<uint32_t>(value.partition.size()), 0};
    out.put(bytes_of(owner));
    out.put(std::as_bytes(std::span(value.field.data(), value.field.size())));
    out.put(std::as_bytes(std::span(value.partition.data(), value.partition.size())));
    out.put(std::as_bytes(std::span(view.shape.data(), view.shape.size())));
    out.pad();
    out.put(view.bytes());
  }
  out.finish();
}

std::vector<StoredValue> read_checkpoint(const std::string& path) {
  return Decoder(path, read_file(path)).decode();
}

std::optional<uint64_t> checkpoint_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error(ErrorCode::kNotFound, "checkpoint \"" + path + "\" does not exist or cannot be read");
  const auto size = static_cast<uint64_t>(in.tellg());
  if (size < sizeof(FileHeader) + kTrailerSize) return std::nullopt;
  FileHeader header{};
  uint64_t trailer = 0;
  in.seekg(0);
  in.read(reinterpret_cast<char*>(&header), sizeof header);
  in.seekg(static_cast<std::streamoff>(size - kTrailerSize));
  in.read(reinterpret_cast<char*>(&trailer), sizeof trailer);
  if (!in) throw_invalid("checkpoint \"" + path + "\" cannot be read");
  if (header.magic != kMagic) return std::nullopt;
  return trailer;
}

}  // namespace seqflow
