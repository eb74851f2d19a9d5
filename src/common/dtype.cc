// Element types: sizes, names (numpy / torch spelling) and parsing.
#include <array>
#include <optional>
#include <span>
#include <string>

#include "seqflow/error.h"
#include "seqflow/tensor.h"
#include "common/checked_math.h"
#include "common/dtype_code.h"

namespace seqflow {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

// Indexed by the enum value; the order is the enum's and the checkpoint's.
constexpr std::array<DTypeInfo, kDTypeCount> kDTypes = {{
    {DType::kBool, "bool", 1},
    {DType::kUInt8, "uint8", 1},
    {DType::kInt8, "int8", 1},
    {DType::kInt16, "int16", 2},
    {DType::kInt32, "int32", 4},
    {DType::kInt64, "int64", 8},
    {DType::kFloat16, "float16", 2},
    {DType::kBFloat16, "bfloat16", 2},
    {DType::kFloat32, "float32", 4},
    {DType::kFloat64, "float64", 8},
}};

// torch's short names; only spelled with the "torch." prefix because bare
// "float" and "int" mean float64 / int64 in numpy but float32 / int32 in torch.
struct Alias {
  std::string_view name;
  DType dtype;
};
constexpr Alias kTorchAliases[] = {
    {"float", DType::kFloat32}, {"half", DType::kFloat16}, {"double", DType::kFloat64},
    {"long", DType::kInt64},    {"int", DType::kInt32},    {"short", DType::kInt16},
};
// Unambiguous in numpy and torch alike.
constexpr Alias kBareAliases[] = {{"half", DType::kFloat16}, {"double", DType::kFloat64}};

const DTypeInfo& info(DType dtype) {
  const auto code = static_cast<uint8_t>(dtype);
  if (!is_dtype_code(code)) throw_invalid("unknown dtype code " + std::to_string(code));
  return kDTypes[code];
}

std::optional<DType> find(std::string_view name, std::span<const Alias> aliases) {
  for (const DTypeInfo& entry : kDTypes) {
    if (entry.name == name) return entry.dtype;
  }
  for (const Alias& alias : aliases) {
    if (alias.name == name) return alias.dtype;
  }
  return std::nullopt;
}

}  // namespace

bool is_dtype_code(uint8_t code) { return code < kDTypeCount; }

size_t dtype_size(DType dtype) { return info(dtype).size; }

std::string_view dtype_name(DType dtype) { return info(dtype).name; }

DType parse_dtype(std::string_view name) {
  constexpr std::string_view kTorchPrefix = "torch.";
  std::optional<DType> found =
      name.starts_with(kTorchPrefix) ? find(name.substr(kTorchPrefix.size()), kTorchAliases) : find(name, kBareAliases);
  if (found) return *found;
  std::string expected;
  for (const DTypeInfo& entry : kDTypes) {
    expected += (expected.empty() ? "" : ", ") + std::string(entry.name);
  }
  throw_invalid("unknown dtype \"" + std::string(name) + "\"; expected one of " + expected +
                " (optionally as torch.<name>)");
}

int64_t element_count(const Shape& shape) {
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) {
      throw_invalid("shape dimension " + std::to_string(d) + " is negative: " + std::to_string(shape[d]));
    }
    auto product = checked_mul(count, shape[d]);
    if (!product) {
      throw_invalid("shape element count overflows int64 at dimension " + std::to_string(d));
    }
    count = *product;
  }
  return count;
}

}  // namespace seqflow
