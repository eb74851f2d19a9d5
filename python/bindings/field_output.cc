// What get_data returns for each field, by format and layout: numpy arrays
// or torch tensors over the bytes field_to_python handed out (no copy), and
// which torch container wraps them (seqflow._convert makes the container).
#include <nanobind/stl/string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bindings/cached_attribute.h"
#include "bindings/tensor_conversion.h"
#include "seqflow/error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

// Arrays of one field in one format: views of the arrays field_to_python made.
struct Views {
  std::string field;
  DType dtype;
  bool torch;

  // numpy cannot hold bfloat16 (field_to_python hands it over as uint16 bits).
  void check_numpy() const {
    if (!torch && dtype == DType::kBFloat16) {
      throw_invalid("field '" + field + "' is bfloat16, which numpy cannot hold; use format='torch'");
    }
  }

  // An array of `shape` over `data`, which `owner` keeps alive; numpy arrays writable when `writable`.
  nb::object operator()(void* data, const std::vector<size_t>& shape, nb::handle owner, bool writable) const {
    if (torch) {
      const nb::dlpack::dtype code =
          dtype == DType::kBFloat16 ? nb::dlpack::dtype{static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1}
                                    : to_dlpack(dtype);
      return nb::cast(
          nb::ndarray<nb::pytorch>(data, shape.size(), shape.data(), owner, nullptr, code, nb::device::cpu::value));
    }
    if (writable) {
      return nb::cast(nb::ndarray<nb::numpy>(data, shape.size(), shape.data(), owner, nullptr, to_dlpack(dtype),
                                             nb::device::cpu::value));
    }
    return nb::cast(nb::ndarray<nb::numpy, nb::ro>(data, shape.size(), shape.data(), owner, nullptr, to_dlpack(dtype),
                                                   nb::device::cpu::value));
  }

  // Part of numpy array `array`: from `byte_offset`, of `shape`.
  nb::object part(nb::handle array, const AnyArray& base, size_t byte_offset, const std::vector<size_t>& shape) const {
    void* data = static_cast<std::byte*>(const_cast<void*>(base.data())) + byte_offset;
    return (*this)(data, shape, array, torch || nb::cast<bool>(array.attr("flags").attr("writeable")));
  }

  // The whole array, as torch when `torch`: torch.from_numpy, a C call
  // several times cheaper than a DLPack export for the common dense field.
  nb::object whole(nb::handle array) const {
    if (!torch) return nb::borrow(array);
    static CachedAttribute from_numpy("torch", "from_numpy");
    nb::object tensor = from_numpy(array);
    if (dtype != DType::kBFloat16) return tensor;
    static CachedAttribute bfloat16("torch", "bfloat16");
    return tensor.attr("view")(bfloat16.get());  // field_to_python hands bfloat16 over as uint16 bits
  }
};

nb::object torch_offsets(std::vector<int64_t>&& offsets) {
  auto* owned = new std::vector<int64_t>(std::move(offsets));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<int64_t>*>(p); });
  return nb::cast(nb::ndarray<nb::pytorch, int64_t, nb::ndim<1>>(owned->data(), {owned->size()}, owner));
}

nb::tuple value(nb::handle out) { return nb::make_tuple("value", out); }

// ("jagged", values of the rows stacked along their first dimension, offsets of the rows).
nb::tuple jagged(const Views& views, nb::handle owner, const AnyArray& base, const std::vector<size_t>& stacked,
                 std::vector<int64_t>&& offsets) {
  return nb::make_tuple("jagged", views.part(owner, base, 0, stacked), torch_offsets(std::move(offsets)));
}

// Rows of one rank: as torch, jagged when only their first dimension differs,
// else strided (which copies them), as TransferQueue packs them.
nb::tuple ragged_out(const Views& views, nb::handle values, const Int64Matrix& shapes) {
  const AnyArray base = nb::cast<AnyArray>(values);
  const size_t n = shapes.shape(0);
  const size_t rank = shapes.shape(1);
  if (views.torch && rank == 0) return value(views.whole(values));  // 0-d rows
  const int64_t* dims = shapes.data();
  const auto shape_of = [&](size_t i) { return std::vector<size_t>(dims + i * rank, dims + (i + 1) * rank); };
  bool same_inner = true;
  for (size_t i = 1; i < n && same_inner; ++i)
    same_inner = std::equal(dims + i * rank + 1, dims + (i + 1) * rank, dims + 1);
  if (views.torch && same_inner) {
    std::vector<size_t> stacked = shape_of(0);
    std::vector<int64_t> offsets{0};
    for (size_t i = 0; i < n; ++i) offsets.push_back(offsets.back() + dims[i * rank]);
    stacked[0] = static_cast<size_t>(offsets.back());
    return jagged(views, values, base, stacked, std::move(offsets));
  }
  nb::list rows;
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::vector<size_t> shape = shape_of(i);
    rows.append(views.part(values, base, at, shape));
    at += static_cast<size_t>(element_count(Shape(shape.begin(), shape.end()))) * base.itemsize();
  }
  return nb::make_tuple(views.torch ? "strided" : "value", rows);
}

nb::tuple field_out(const std::string& field, nb::tuple native, const std::string& fmt, const std::string& layout) {
  const std::string kind = nb::cast<std::string>(native[0]);
  const bool tensordict = fmt == "tensordict";
  if (kind == "objects") return nb::make_tuple(tensordict ? "stack" : "value", native[1]);
  const Views views{field, parse_dtype(nb::cast<std::string>(native[nb::len(native) - 1])), fmt != "numpy"};
  views.check_numpy();
  if (kind == "dense") {
    if (layout == "transfer_queue" && views.torch && nb::cast<int>(native[1].attr("ndim")) > 1) {
      // TransferQueue nests every field whose rows are not 0-d.
      const AnyArray base = nb::cast<AnyArray>(native[1]);
      const size_t rows = base.shape(0);
      const size_t first = base.shape(1);
      std::vector<size_t> stacked{rows * first};
      for (size_t d = 2; d < base.ndim(); ++d) stacked.push_back(base.shape(d));
      std::vector<int64_t> offsets(rows + 1);
      for (size_t i = 0; i <= rows; ++i) offsets[i] = static_cast<int64_t>(i * first);
      return jagged(views, native[1], base, stacked, std::move(offsets));
    }
    return value(views.whole(native[1]));
  }
  if (kind == "ragged") {
    return ragged_out(views, native[1], nb::cast<Int64Matrix>(native[2]));
  }
  nb::list arrays;  // "list": samples of differing rank
  for (nb::handle array : native[1]) arrays.append(views.whole(array));
  return nb::make_tuple(tensordict ? "stack" : "value", arrays);
}

// A field no sample of the batch holds: no rows, in the shape its schema gives.
nb::tuple empty_field(const std::string& field, nb::handle schema, const std::string& fmt) {
  const auto entry = [&schema](const char* key) { return schema.attr("get")(key); };
  if (bool(nb::bool_(entry("is_non_tensor")))) {
    return nb::make_tuple(fmt == "tensordict" ? "stack" : "value", nb::list());
  }
  const Views views{field, parse_dtype(nb::cast<std::string>(entry("dtype"))), fmt != "numpy"};
  if (!views.torch && bool(nb::bool_(entry("is_nested")))) return value(nb::list());
  views.check_numpy();
  std::vector<size_t> shape{0};
  nb::object dims = entry("shape");
  if (!dims.is_none()) {
    for (nb::handle d : dims) shape.push_back(static_cast<size_t>(std::max<int64_t>(0, nb::cast<int64_t>(d))));
  }
  alignas(16) static std::byte nothing[16];  // no rows: no bytes to own
  return value(views(nothing, shape, nb::handle(), true));
}

}  // namespace

nb::dict fields_out(const std::vector<std::string>& fields, const nb::dict& native, const nb::dict& schema,
                    const std::string& fmt, const std::string& layout, nb::handle container) {
  nb::dict out;
  for (const std::string& field : fields) {
    nb::str name(field.c_str(), field.size());
    nb::tuple answer;
    if (native.contains(name)) {
      answer = field_out(field, nb::borrow<nb::tuple>(native[name]), fmt, layout);
    } else if (schema.contains(name)) {
      answer = empty_field(field, schema[name], fmt);
    } else {
      continue;
    }
    out[name] = nb::cast<std::string>(answer[0]) == "value" ? answer[1] : container(*answer);
  }
  return out;
}

}  // namespace seqflow::bindings
