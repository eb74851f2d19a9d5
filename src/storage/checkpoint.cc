// Writing and validating storage checkpoint files (format in checkpoint.h).
#include "storage/checkpoint.h"

#include <array>
#include <bit>
#include <cstring>
#include <type_traits>

#include "common/dtype_code.h"
#include "durable/framed_file.h"
#include "seqflow/error.h"
#include "storage/value_check.h"

namespace seqflow {
namespace {

static_assert(std::endian::native == std::endian::little,
              "checkpoints are written in host order; a big-endian host needs byte swapping");

constexpr uint32_t kVersion = 4;
constexpr uint32_t kVersionBeforeBlockPlacement = 3;
constexpr uint32_t kVersionWithoutWriteVersions = 2;
constexpr uint32_t kVersionWithoutOwners = 1;
constexpr durable::FileKind kStorageCheckpoint{"SEQFSTOR", "storage checkpoint", kVersion, kVersionWithoutOwners};
constexpr size_t kPayloadAlignment = 64;

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

// Version 3: which write the value is (see StoredValue).
struct WriteVersionHeader {
  uint64_t version;
  uint8_t committed;
  std::array<uint8_t, 7> zero;
};

static_assert(sizeof(WriteVersionHeader) == 16 && std::is_trivially_copyable_v<WriteVersionHeader>);
static_assert(sizeof(OwnerHeader) == 16 && std::is_trivially_copyable_v<OwnerHeader>);
static_assert(sizeof(RecordHeader) == 32 && std::is_trivially_copyable_v<RecordHeader>);
constexpr size_t kMinRecordSize = sizeof(RecordHeader) + 1;  // a field name has a byte at least

size_t padding_after(size_t offset) { return (kPayloadAlignment - offset % kPayloadAlignment) % kPayloadAlignment; }

template <typename T>
std::span<const std::byte> bytes_of(const T& value) {
  return std::as_bytes(std::span(&value, 1));
}

class Encoder {
 public:
  explicit Encoder(const std::string& path) : file_(path, kStorageCheckpoint) {}

  void put(std::span<const std::byte> bytes) { file_.write(bytes); }

  void pad() {
    static constexpr std::array<std::byte, kPayloadAlignment> kZeros{};
    put(std::span(kZeros).first(padding_after(file_.offset())));
  }

  void finish() { file_.commit(); }

 private:
  durable::FramedFileWriter file_;
};

class Decoder {
 public:
  Decoder(const std::string& path, const durable::FramedFile& file)
      : path_(path),
        file_(file.bytes),
        end_(file.body_end),
        offset_(durable::kFrameHeaderSize),
        with_owners_(file.version >= kVersionWithoutWriteVersions),
        with_write_versions_(file.version > kVersionWithoutWriteVersions) {}

  std::vector<StoredValue> decode() {
    const auto records = take<uint64_t>("the record count");
    if (records > (end_ - offset_) / kMinRecordSize) {
      fail("is corrupt or truncated: " + std::to_string(records) + " records cannot fit in " +
           std::to_string(file_->size) + " bytes");
    }
    std::vector<StoredValue> values;
    values.reserve(records);
    for (record_ = 0; record_ < records; ++record_) values.push_back(decode_record());
    if (offset_ != end_) {
      fail("is corrupt: " + std::to_string(end_ - offset_) + " unexpected bytes after the last record");
    }
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
    const auto write =
        with_write_versions_ ? take<WriteVersionHeader>("the write version header") : WriteVersionHeader{0, 1, {}};
    if (write.zero != decltype(write.zero){}) fail_record("reserved write version bytes are not zero");
    if (write.committed > 1) fail_record("committed is " + std::to_string(write.committed));
    value.version = write.version;
    value.committed = write.committed == 1;
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
    if (auto problem = value_problem(value.view.dtype, value.view.is_object, value.view.shape, value.view.nbytes)) {
      fail_record("field \"" + value.field + "\" of global index " + std::to_string(value.global_index) + ": " +
                  *problem);
    }
    return value;
  }

  std::span<const std::byte> take_bytes(uint64_t n, const char* what) {
    if (n > end_ - offset_) {
      const std::string where = record_ == kNoRecord ? "" : " of record " + std::to_string(record_);
      fail("is truncated (or corrupt): " + std::string(what) + where + " needs " + std::to_string(n) +
           " bytes at offset " + std::to_string(offset_) + ", " + std::to_string(end_ - offset_) +
           " remain before the checksum");
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

  [[noreturn]] void fail_record(const std::string& problem) const {
    fail("is corrupt: record " + std::to_string(record_) + ": " + problem);
  }

  [[noreturn]] void fail(const std::string& problem) const { throw_invalid("checkpoint \"" + path_ + "\" " + problem); }

  const std::string& path_;
  std::shared_ptr<const Buffer> file_;
  size_t end_;
  size_t offset_;
  static constexpr uint64_t kNoRecord = UINT64_MAX;  // still in the file header
  uint64_t record_ = kNoRecord;
  bool with_owners_;
  bool with_write_versions_;
};

}  // namespace

void write_checkpoint(const std::string& path, std::span<const StoredValue> values) {
  Encoder out(path);
  const uint64_t records = values.size();
  out.put(bytes_of(records));
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
    const WriteVersionHeader write{value.version, static_cast<uint8_t>(value.committed ? 1 : 0), {}};
    out.put(bytes_of(write));
    out.put(std::as_bytes(std::span(value.field.data(), value.field.size())));
    out.put(std::as_bytes(std::span(value.partition.data(), value.partition.size())));
    out.put(std::as_bytes(std::span(view.shape.data(), view.shape.size())));
    out.pad();
    out.put(view.bytes());
  }
  out.finish();
}

std::vector<StoredValue> read_checkpoint(const std::string& path, bool* placed_in_blocks) {
  return durable::read_framed_file(path, kStorageCheckpoint, [&](const durable::FramedFile& file) {
    if (placed_in_blocks != nullptr) *placed_in_blocks = file.version > kVersionBeforeBlockPlacement;
    return Decoder(path, file).decode();
  });
}

}  // namespace seqflow
