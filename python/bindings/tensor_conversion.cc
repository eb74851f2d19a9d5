// Tensors across the Python boundary: one copy in (or a borrow), views out.
#include "bindings/tensor_conversion.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <type_traits>

#include "seqflow/error.h"
#include "bindings/gil.h"
#include "bindings/msgpack_conversion.h"
#include "bindings/plain_value_conversion.h"
#include "common/aligned_buffer.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

using nb::dlpack::dtype_code;

std::string field_name(const std::string& field) { return "field \"" + field + "\""; }

std::string dlpack_name(nb::dlpack::dtype dtype) {
  const char* kinds[] = {"int", "uint", "float", "?", "bfloat", "complex", "bool"};
  const std::string kind = dtype.code < 7 ? kinds[dtype.code] : "code" + std::to_string(dtype.code);
  return kind + std::to_string(dtype.bits) + (dtype.lanes != 1 ? "x" + std::to_string(dtype.lanes) : "");
}

DType to_dtype(nb::dlpack::dtype dtype, const std::string& field) {
  if (dtype.lanes == 1) {
    switch (static_cast<dtype_code>(dtype.code)) {
      case dtype_code::Bool:
        if (dtype.bits == 8) return DType::kBool;
        break;
      case dtype_code::UInt:
        if (dtype.bits == 8) return DType::kUInt8;
        break;
      case dtype_code::Int:
        switch (dtype.bits) {
          case 8:
            return DType::kInt8;
          case 16:
            return DType::kInt16;
          case 32:
            return DType::kInt32;
          case 64:
            return DType::kInt64;
          default:
            break;
        }
        break;
      case dtype_code::Float:
        switch (dtype.bits) {
          case 16:
            return DType::kFloat16;
          case 32:
            return DType::kFloat32;
          case 64:
            return DType::kFloat64;
          default:
            break;
        }
        break;
      case dtype_code::Bfloat:
        if (dtype.bits == 16) return DType::kBFloat16;
        break;
      default:
        break;
    }
  }
  throw_unstorable_dtype(field, dlpack_name(dtype));
}

}  // namespace

void throw_unstorable_dtype(const std::string& field, const std::string& dtype) {
  throw_invalid(field_name(field) + " has dtype " + dtype +
                ", which seqflow does not store; use bool, uint8, int8-64, float16, bfloat16, float32 or float64");
}

nb::dlpack::dtype to_dlpack(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return nb::dtype<bool>();
    case DType::kUInt8:
      return nb::dtype<uint8_t>();
    case DType::kInt8:
      return nb::dtype<int8_t>();
    case DType::kInt16:
      return nb::dtype<int16_t>();
    case DType::kInt32:
      return nb::dtype<int32_t>();
    case DType::kInt64:
      return nb::dtype<int64_t>();
    case DType::kFloat16:
      return {static_cast<uint8_t>(dtype_code::Float), 16, 1};
    case DType::kBFloat16:
      return nb::dtype<uint16_t>();
    case DType::kFloat32:
      return nb::dtype<float>();
    case DType::kFloat64:
      return nb::dtype<double>();
  }
  return nb::dtype<uint8_t>();
}

namespace {

Shape shape_of(const AnyArray& array, size_t first_dim) {
  Shape shape;
  for (size_t d = first_dim; d < array.ndim(); ++d) shape.push_back(static_cast<int64_t>(array.shape(d)));
  return shape;
}

// Copies `parts` back to back into one fresh buffer, without the GIL.
struct Part {
  const void* data;
  size_t nbytes;
};
std::shared_ptr<const Buffer> concatenate(const std::vector<Part>& parts, size_t total) {
  WritableBuffer out = allocate_buffer(total);
  GilReleased release;
  size_t at = 0;
  for (const Part& part : parts) {
    if (part.nbytes != 0) std::memcpy(out.data + at, part.data, part.nbytes);
    at += part.nbytes;
  }
  return std::move(out.buffer);
}

// A buffer over the array's own bytes that holds a reference to it. The last
// reference may go on a ZeroMQ I/O thread (a zero-copy frame still queued
// after a failed put), so the release takes the GIL; once Python finalizes,
// the array is leaked instead.
std::shared_ptr<const Buffer> borrowed(const AnyArray& array) {
  std::shared_ptr<const void> owner(new AnyArray(array), [](const AnyArray* held) {
    if (python_finalizing()) return;
    GilHeld gil;
    delete held;
  });
  return std::make_shared<Buffer>(
      Buffer{static_cast<const std::byte*>(array.data()), array.nbytes(), std::move(owner)});
}

// The array's bytes as a column buffer: borrowed, or copied.
std::shared_ptr<const Buffer> bytes_of(const AnyArray& array, bool borrow) {
  return borrow ? borrowed(array) : concatenate({{array.data(), array.nbytes()}}, array.nbytes());
}

AnyArray as_array(nb::handle item, const std::string& field, size_t index) {
  AnyArray array;
  if (!nb::try_cast(item, array)) {
    throw_invalid(field_name(field) + ", sample " + std::to_string(index) + ": " + nb::type_name(item.type()).c_str() +
                  " is not a CPU array or tensor; a list field holds one array per sample");
  }
  return array;
}

// The owner of an output array: a reference to the storage buffer.
nb::capsule keep_alive(std::shared_ptr<const Buffer> buffer) {
  auto* held = new std::shared_ptr<const Buffer>(std::move(buffer));
  return nb::capsule(held, [](void* p) noexcept { delete static_cast<std::shared_ptr<const Buffer>*>(p); });
}

// A numpy array over buffer bytes. Read-only unless `writable` (torch has no
// read-only tensors; the caller then shares the stored bytes knowingly).
nb::object array_over(const std::shared_ptr<const Buffer>& buffer, size_t offset, const Shape& shape, DType dtype,
                      bool writable) {
  std::vector<size_t> dims(shape.begin(), shape.end());
  auto* data = const_cast<std::byte*>(buffer->data + offset);
  if (writable) {
    return nb::cast(nb::ndarray<nb::numpy>(data, dims.size(), dims.data(), keep_alive(buffer), nullptr,
                                           to_dlpack(dtype), nb::device::cpu::value));
  }
  return nb::cast(nb::ndarray<nb::numpy, nb::ro>(data, dims.size(), dims.data(), keep_alive(buffer), nullptr,
                                                 to_dlpack(dtype), nb::device::cpu::value));
}

// The views as one byte range of one buffer (samples back to back, in
// order), or a fresh buffer gathering them (always, when `fresh`). Returns
// the buffer and offset.
std::pair<std::shared_ptr<const Buffer>, size_t> contiguous(const std::vector<SampleView>& views, bool fresh) {
  const SampleView& first = views.front();
  bool run = true;
  size_t total = first.nbytes;
  for (size_t i = 1; i < views.size(); ++i) {
    run = run && views[i].buffer == first.buffer && views[i].offset == views[i - 1].offset + views[i - 1].nbytes;
    total += views[i].nbytes;
  }
  if (run && !fresh) return {first.buffer, first.offset};
  std::vector<Part> parts;
  parts.reserve(views.size());
  for (const SampleView& view : views) parts.push_back({view.bytes().data(), view.nbytes});
  return {concatenate(parts, total), 0};
}

// A non-tensor sample's bytes lead with what they hold: pickle's 0x80 (its
// protocol opcode), kPlainValueTag and MessagePack, or else UTF-8 text (which
// starts with neither byte). Strings stay raw text, as they always were.
constexpr unsigned char kPickleLead = 0x80;
constexpr unsigned char kPlainValueTag = 0xc1;  // used by neither UTF-8 nor MessagePack

struct ObjectDecoder {
  const std::string& field;
  bool allow_pickle;
  MsgpackDecoder plain;
  nb::object loads;

  nb::object operator()(const SampleView& view, size_t row) {
    const auto bytes = view.bytes();
    const char* data = reinterpret_cast<const char*>(bytes.data());
    const auto lead = bytes.empty() ? 0 : static_cast<unsigned char>(data[0]);
    if (lead == kPlainValueTag) {
      std::string error;
      nb::object out = plain.decode({data + 1, bytes.size() - 1}, error);
      if (!out.is_valid()) throw_invalid(field_name(field) + ", sample " + std::to_string(row) + " " + error);
      return out;
    }
    if (lead == kPickleLead) {
      if (!allow_pickle) {
        throw_invalid(field_name(field) + ", sample " + std::to_string(row) +
                      " holds a pickled object; reading it runs code of whoever wrote it, so it needs "
                      "allow_pickle=True");
      }
      if (!loads.is_valid()) loads = nb::module_::import_("pickle").attr("loads");
      return loads(nb::bytes(data, bytes.size()));
    }
    PyObject* text = PyUnicode_DecodeUTF8(data, static_cast<Py_ssize_t>(bytes.size()), "strict");
    if (text == nullptr) nb::raise_python_error();
    return nb::steal(text);
  }
};

// A copy of the views' bytes, one view per sample over it.
std::vector<SampleView> copied(const std::vector<SampleView>& views) {
  std::vector<Part> parts;
  parts.reserve(views.size());
  size_t total = 0;
  for (const SampleView& view : views) {
    parts.push_back({view.bytes().data(), view.nbytes});
    total += view.nbytes;
  }
  std::shared_ptr<const Buffer> buffer = concatenate(parts, total);
  std::vector<SampleView> out = views;
  size_t at = 0;
  for (SampleView& view : out) {
    view.buffer = buffer;
    view.offset = at;
    at += view.nbytes;
  }
  return out;
}

Column dense_column(const std::string& field, const AnyArray& array, bool borrow) {
  if (array.ndim() == 0) {
    throw_invalid(field_name(field) + " is a 0-d value; the first dimension must be the batch");
  }
  Column column;
  column.field = field;
  column.dtype = to_dtype(array.dtype(), field);
  column.shapes = {shape_of(array, 1)};
  const size_t n = array.shape(0);
  const size_t per_sample = n == 0 ? 0 : array.nbytes() / n;
  column.offsets.resize(n + 1);
  for (size_t i = 0; i <= n; ++i) column.offsets[i] = i * per_sample;
  column.buffer = bytes_of(array, borrow);
  return column;
}

Column jagged_column(const std::string& field, const AnyArray& values, const Int64Vector& offsets, bool borrow) {
  if (values.ndim() == 0 || offsets.shape(0) == 0) {
    throw_invalid(field_name(field) + ": a jagged field needs values with a first dimension and offsets");
  }
  Column column;
  column.field = field;
  column.dtype = to_dtype(values.dtype(), field);
  const Shape inner = shape_of(values, 1);
  const size_t row_bytes = values.shape(0) == 0 ? 0 : values.nbytes() / values.shape(0);
  const size_t n = offsets.shape(0) - 1;
  const int64_t* bounds = offsets.data();
  const auto rows = static_cast<int64_t>(values.shape(0));
  for (size_t i = 0; i <= n; ++i) {
    const int64_t floor = i == 0 ? 0 : bounds[i - 1];
    if (bounds[i] < floor || bounds[i] > rows) {
      throw_invalid(field_name(field) + ": offsets[" + std::to_string(i) + "] = " + std::to_string(bounds[i]) +
                    " is outside [" + std::to_string(floor) + ", " + std::to_string(rows) +
                    "]; offsets ascend within the rows of the values");
    }
  }
  column.offsets.reserve(n + 1);
  column.shapes.reserve(n);
  for (size_t i = 0; i <= n; ++i) column.offsets.push_back(static_cast<size_t>(bounds[i] - bounds[0]) * row_bytes);
  for (size_t i = 0; i < n; ++i) {
    Shape shape{bounds[i + 1] - bounds[i]};
    shape.insert(shape.end(), inner.begin(), inner.end());
    column.shapes.push_back(std::move(shape));
  }
  const Part used{static_cast<const std::byte*>(values.data()) + static_cast<size_t>(bounds[0]) * row_bytes,
                  column.offsets.back()};
  if (borrow) {
    column.buffer = std::make_shared<Buffer>(
        Buffer{static_cast<const std::byte*>(used.data), used.nbytes, borrowed(values)});  // keeps the array
  } else {
    column.buffer = concatenate({used}, used.nbytes);
  }
  return column;
}

Column ragged_column(const std::string& field, nb::handle arrays) {
  Column column;
  column.field = field;
  std::vector<AnyArray> items;  // keep the inputs alive through the copy
  for (nb::handle item : arrays) items.push_back(as_array(item, field, items.size()));
  std::vector<Part> parts;
  parts.reserve(items.size());
  column.offsets.reserve(items.size() + 1);
  column.offsets.push_back(0);
  size_t total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const DType dtype = to_dtype(items[i].dtype(), field);
    if (i == 0) column.dtype = dtype;
    if (dtype != column.dtype) {
      throw_invalid(field_name(field) + ", sample " + std::to_string(i) + " has dtype " +
                    std::string(dtype_name(dtype)) + " but sample 0 has " + std::string(dtype_name(column.dtype)) +
                    "; one field holds one dtype");
    }
    if (items[i].ndim() != items[0].ndim()) {
      throw_invalid(field_name(field) + ", sample " + std::to_string(i) + " has " + std::to_string(items[i].ndim()) +
                    " dimensions but sample 0 has " + std::to_string(items[0].ndim()) +
                    "; shapes within a field must agree in rank");
    }
    column.shapes.push_back(shape_of(items[i], 0));
    parts.push_back({items[i].data(), items[i].nbytes()});
    total += items[i].nbytes();
    column.offsets.push_back(total);
  }
  column.buffer = concatenate(parts, total);
  return column;
}

Column object_column(const std::string& field, nb::handle items, bool allow_pickle) {
  Column column;
  column.field = field;
  column.dtype = DType::kUInt8;
  column.is_object = true;
  nb::object dumps;
  std::deque<std::string> encoded;  // plain values' bytes (a deque: parts point into them)
  std::vector<nb::object> held;     // the strings and pickles the parts point into
  std::vector<Part> parts;
  column.offsets.push_back(0);
  size_t total = 0;
  size_t index = 0;
  for (nb::handle item : items) {
    Part part{};
    const auto where = [&] { return field_name(field) + ", sample " + std::to_string(index); };
    MsgpackWriter plain;
    NotPlain not_plain;
    if (PyUnicode_Check(item.ptr())) {
      Py_ssize_t size = 0;
      const char* text = PyUnicode_AsUTF8AndSize(item.ptr(), &size);
      if (text == nullptr) {
        PyErr_Clear();
        throw_invalid(where() + ": the string cannot be encoded as UTF-8");
      }
      part = {text, static_cast<size_t>(size)};
      held.push_back(nb::borrow(item));
    } else if (!(not_plain = write_plain_value(plain, item))) {
      encoded.push_back(std::string(1, static_cast<char>(kPlainValueTag)) + plain.bytes());
      part = {encoded.back().data(), encoded.back().size()};
    } else if (!allow_pickle) {
      const std::string what = nb::type_name(not_plain.part.type()).c_str();
      throw_invalid(
          where() + " holds a " +
          (not_plain.is_key ? "dict key " + std::string(nb::repr(not_plain.part).c_str()) + " (" + what + ")" : what) +
          ", which only pickle can store; seqflow pickles only when the program allows it "
          "(allow_pickle=True), since unpickling runs code of whoever wrote the bytes. Plain values "
          "(None, bool, int, float, str, bytes, lists and str-keyed dicts of them) need no pickle");
    } else {
      if (!dumps.is_valid()) dumps = nb::module_::import_("pickle").attr("dumps");
      try {
        held.push_back(dumps(item, 5));
      } catch (nb::python_error& error) {
        throw_invalid(where() + ": cannot pickle " + nb::type_name(item.type()).c_str() + ": " + error.what());
      }
      nb::bytes bytes = nb::borrow<nb::bytes>(held.back());
      part = {bytes.c_str(), bytes.size()};
    }
    parts.push_back(part);
    total += part.nbytes;
    column.offsets.push_back(total);
    column.shapes.push_back({static_cast<int64_t>(part.nbytes)});
    ++index;
  }
  column.buffer = concatenate(parts, total);
  return column;
}

}  // namespace

std::vector<Column> columns_of(const std::vector<FieldInput>& fields) {
  std::vector<Column> columns;
  columns.reserve(fields.size());
  for (const FieldInput& field : fields) {
    columns.push_back(std::visit(
        [](const auto& input) {
          using Input = std::decay_t<decltype(input)>;
          if constexpr (std::is_same_v<Input, DenseInput>) {
            return std::apply(dense_column, input);
          } else if constexpr (std::is_same_v<Input, JaggedInput>) {
            return std::apply(jagged_column, input);
          } else if constexpr (std::is_same_v<Input, RaggedInput>) {
            return std::apply(ragged_column, input);
          } else {
            return std::apply(object_column, input);
          }
        },
        field));
  }
  return columns;
}

nb::tuple field_to_python(const std::vector<SampleView>& views, const std::string& field, const FieldOutput& output) {
  if (views.empty()) throw_invalid("no samples to convert");
  const SampleView& first = views.front();
  const nb::str dtype(std::string(dtype_name(first.dtype)).c_str());
  if (first.is_object) {
    ObjectDecoder decode{field, output.allow_pickle, {}, {}};
    nb::list out;
    for (size_t i = 0; i < views.size(); ++i) out.append(decode(views[i], i));
    return nb::make_tuple("objects", out);
  }
  const bool same_shape =
      std::all_of(views.begin(), views.end(), [&first](const SampleView& v) { return v.shape == first.shape; });
  const bool same_rank = std::all_of(views.begin(), views.end(),
                                     [&first](const SampleView& v) { return v.shape.size() == first.shape.size(); });
  for (const SampleView& view : views) {
    if (view.dtype != first.dtype || view.is_object) {
      throw Error(ErrorCode::kInternal, "a field holds values of different dtypes");
    }
  }
  if (same_shape && !output.nested) {
    auto [buffer, offset] = contiguous(views, output.fresh);
    Shape shape{static_cast<int64_t>(views.size())};
    shape.insert(shape.end(), first.shape.begin(), first.shape.end());
    return nb::make_tuple("dense", array_over(buffer, offset, shape, first.dtype, output.writable), dtype);
  }
  if (!same_rank) {
    nb::list out;
    for (const SampleView& view : output.fresh ? copied(views) : views) {
      out.append(array_over(view.buffer, view.offset, view.shape, view.dtype, output.writable));
    }
    return nb::make_tuple("list", out, dtype);
  }
  auto [buffer, offset] = contiguous(views, output.fresh);
  int64_t elements = 0;
  const size_t rank = first.shape.size();
  auto* shapes = new std::vector<int64_t>();
  shapes->reserve(views.size() * rank);
  for (const SampleView& view : views) {
    elements += element_count(view.shape);
    shapes->insert(shapes->end(), view.shape.begin(), view.shape.end());
  }
  nb::capsule owner(shapes, [](void* p) noexcept { delete static_cast<std::vector<int64_t>*>(p); });
  nb::ndarray<nb::numpy, int64_t, nb::ndim<2>> shape_array(shapes->data(), {views.size(), rank}, owner);
  return nb::make_tuple("ragged", array_over(buffer, offset, {elements}, first.dtype, output.writable), shape_array,
                        dtype);
}

}  // namespace seqflow::bindings
