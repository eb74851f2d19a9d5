// Tensors as the data plane sees them: a dtype, a shape and bytes that live in
// a reference-counted buffer, so that reads hand out views, not copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace seqflow {

enum class DType : uint8_t {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
};

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // numpy / torch spelling: "float32", "bfloat16", ...
DType parse_dtype(std::string_view name);  // throws kInvalidArgument naming the value

using Shape = std::vector<int64_t>;
int64_t element_count(const Shape& shape);

// Bytes owned by whoever created them (storage, a numpy array, a ZeroMQ
// message); `owner` keeps them alive for as long as any view exists.
struct Buffer {
  const std::byte* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;

  // A new buffer that owns a copy of `bytes`.
  static std::shared_ptr<const Buffer> copy_of(std::span<const std::byte> bytes);
};

// One sample's value of one field: a tensor (dtype + shape) or an opaque
// object (bytes, e.g. a pickled Python object or a UTF-8 string).
struct SampleView {
  std::shared_ptr<const Buffer> buffer;
  size_t offset = 0;  // into buffer->data
  size_t nbytes = 0;
  DType dtype = DType::kUInt8;
  Shape shape;
  bool is_object = false;

  std::span<const std::byte> bytes() const { return {buffer->data + offset, nbytes}; }
};

// A field's values for a batch of samples, as written by one put: one buffer,
// sample i at [offsets[i], offsets[i+1]). Fixed-shape fields have one shape
// for all samples (`shapes.size() == 1`); variable-length fields have one per
// sample. Objects are dtype uint8 with shape {nbytes}.
struct Column {
  std::string field;
  DType dtype = DType::kUInt8;
  bool is_object = false;
  std::vector<Shape> shapes;
  std::vector<size_t> offsets;  // size = samples + 1
  std::shared_ptr<const Buffer> buffer;

  size_t sample_count() const { return offsets.empty() ? 0 : offsets.size() - 1; }
  const Shape& shape_of(size_t i) const { return shapes.size() == 1 ? shapes[0] : shapes[i]; }
  SampleView sample(size_t i) const;
  // Checks offsets, shapes and dtype sizes against the buffer; throws
  // kInvalidArgument naming the field and the first bad sample.
  void validate() const;
};

}  // namespace seqflow
