#include "bindings/batch_meta_conversion.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <span>
#include <string_view>
#include <type_traits>

#include "bindings/arrays.h"
#include "bindings/json_conversion.h"
#include "bindings/msgpack_conversion.h"
#include "core/name_rule.h"
#include "seqflow/error.h"

namespace nb = nanobind;

namespace seqflow::bindings {
namespace {

using Json = nlohmann::json;
using BoolMatrix = nb::ndarray<nb::numpy, bool, nb::ndim<2>>;
using Int8Array = nb::ndarray<nb::numpy, int8_t, nb::ndim<1>>;

// Bools as one byte each, the layout numpy's bool dtype has.
BoolMatrix bool_matrix(std::vector<uint8_t>&& values, size_t rows, size_t columns) {
  auto* owned = new std::vector<uint8_t>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  return BoolMatrix(reinterpret_cast<bool*>(owned->data()), {rows, columns}, owner);
}

nb::dict schema_to_python(const FieldSchema& schema) {
  nb::dict out;
  // A non-tensor field has no dtype or shape (None, as in TransferQueue):
  // how the engine stores its objects is private.
  if (schema.is_object) {
    out["dtype"] = nb::none();
    out["shape"] = nb::none();
  } else {
    out["dtype"] = std::string(dtype_name(schema.dtype));
    nb::list shape;
    for (int64_t d : schema.shape) shape.append(d);
    out["shape"] = nb::tuple(shape);
  }
  out["is_nested"] = schema.is_nested;
  out["is_non_tensor"] = schema.is_object;
  return out;
}

FieldSchema schema_from_python(const std::string& field, nb::handle value) {
  nb::dict entry;
  if (!nb::try_cast(value, entry)) throw_invalid("field_schema[\"" + field + "\"] must be a dict");
  FieldSchema schema;
  if (entry.contains("dtype") && !entry["dtype"].is_none()) {
    nb::object dtype = entry["dtype"];
    if (!nb::isinstance<nb::str>(dtype)) {
      throw_invalid("field_schema[\"" + field + "\"][\"dtype\"] must be a dtype name, got a " +
                    std::string(nb::type_name(dtype.type()).c_str()));
    }
    schema.dtype = parse_dtype(nb::cast<std::string>(dtype));
  }
  if (entry.contains("shape") && !entry["shape"].is_none()) {
    for (nb::handle d : entry["shape"]) schema.shape.push_back(nb::cast<int64_t>(d));
  }
  if (entry.contains("is_nested")) schema.is_nested = nb::cast<bool>(entry["is_nested"]);
  if (entry.contains("is_non_tensor")) schema.is_object = nb::cast<bool>(entry["is_non_tensor"]);
  return schema;
}

// One int8 per sample: 1 when it has every field (and there are fields),
// TransferQueue's production_status.
Int8Array sample_status(const BatchMeta& meta) {
  const size_t fields = meta.field_schema.size();
  std::vector<int8_t> status(meta.size(), 0);
  for (size_t i = 0; fields > 0 && i < status.size(); ++i) {
    const auto row = meta.production_status.begin() + static_cast<std::ptrdiff_t>(i * fields);
    status[i] = std::all_of(row, row + static_cast<std::ptrdiff_t>(fields), [](uint8_t produced) { return produced; });
  }
  return to_numpy(std::move(status));
}

template <typename Int>
nb::list int_list(const std::vector<Int>& values) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(values.size()));
  if (list == nullptr) throw nb::python_error();
  nb::list out = nb::steal<nb::list>(list);
  for (size_t i = 0; i < values.size(); ++i) {
    PyObject* value = std::is_signed_v<Int> ? PyLong_FromLongLong(static_cast<long long>(values[i]))
                                            : PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(values[i]));
    if (value == nullptr) throw nb::python_error();
    PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), value);
  }
  return out;
}

CustomMetaList custom_meta_from_encoded(nb::bytes bytes, const OffsetsInput& offsets) {
  return CustomMetaList::from_encoded(std::string(bytes.c_str(), bytes.size()),
                                      std::vector<uint32_t>(offsets.data(), offsets.data() + offsets.shape(0)));
}

}  // namespace

nb::dict meta_to_python(BatchMeta&& meta) {
  const size_t n = meta.size();
  const size_t fields = meta.field_schema.size();
  nb::dict out;
  out["global_indexes"] = int_list(meta.global_indexes);
  out["generations"] = meta.generations.empty() ? nb::object(nb::none()) : nb::object(int_list(meta.generations));
  // One str object per run of equal names.
  nb::list partitions;
  for (size_t r = 0, begin = 0; r < meta.partition_ids.run_count(); begin = meta.partition_ids.run_end(r++)) {
    nb::str name(meta.partition_ids.run_name(r).data(), meta.partition_ids.run_name(r).size());
    for (size_t i = begin; i < meta.partition_ids.run_end(r); ++i) partitions.append(name);
  }
  out["partition_ids"] = partitions;
  nb::dict schema;
  for (const auto& [field, entry] : meta.field_schema) schema[field.c_str()] = schema_to_python(entry);
  out["field_schema"] = schema;
  meta.production_status.resize(n * fields);
  out["production_status"] = sample_status(meta);
  out["field_status"] = bool_matrix(std::move(meta.production_status), n, fields);
  // Decoded on first use (seqflow.BatchMeta.custom_meta).
  std::vector<uint32_t> offsets = meta.custom_meta.offsets();
  out["custom_meta_encoded"] = nb::make_tuple(
      nb::bytes(meta.custom_meta.bytes().data(), meta.custom_meta.bytes().size()),
      to_numpy(std::move(offsets)));
  out["extra_info"] = from_json(meta.extra_info.is_object() ? meta.extra_info : Json::object());
  return out;
}

nb::list decode_custom_meta(nb::bytes bytes, const OffsetsInput& offsets) {
  const std::span<const uint32_t> bounds(offsets.data(), offsets.shape(0));
  CustomMetaList::check_offsets(bytes.size(), bounds);
  const std::string_view all(bytes.c_str(), bytes.size());
  MsgpackDecoder decoder;
  nb::list out;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    std::string error;
    nb::object value = decoder.decode(all.substr(bounds[i], bounds[i + 1] - bounds[i]), error);
    if (!value.is_valid()) throw_invalid("custom_meta[" + std::to_string(i) + "] " + error);
    if (!PyDict_Check(value.ptr())) throw_invalid("custom_meta[" + std::to_string(i) + "] is not a MessagePack map");
    out.append(value);
  }
  return out;
}

std::vector<Json> custom_meta_from_python(nb::handle value) {
  std::vector<Json> out;
  if (value.is_none()) return out;
  size_t i = 0;
  for (nb::handle item : value) {
    const std::string where = "custom_meta[" + std::to_string(i) + "]";
    if (!PyDict_Check(item.ptr())) {
      throw_invalid(where + " must be a dict, got " + std::string(nb::type_name(item.type()).c_str()));
    }
    Json entry = to_json(item, where);
    // Top-level keys follow the name rule, as tags' keys do (a NUL would cut them short).
    for (const auto& member : entry.items()) core::check_name(member.key(), where + " key");
    out.push_back(std::move(entry));
    ++i;
  }
  return out;
}

BatchMeta meta_from_python(nb::dict meta) {
  BatchMeta out;
  auto indexes = nb::cast<Int64Input>(meta["global_indexes"]);
  out.global_indexes.assign(indexes.data(), indexes.data() + indexes.shape(0));
  if (meta.contains("generations") && !meta["generations"].is_none()) {
    auto generations = nb::cast<UInt64Input>(meta["generations"]);
    out.generations.assign(generations.data(), generations.data() + generations.shape(0));
  }
  for (nb::handle p : meta["partition_ids"]) out.partition_ids.push_back(nb::cast<std::string>(p));
  if (meta.contains("field_schema")) {
    for (auto [key, value] : nb::cast<nb::dict>(meta["field_schema"])) {
      const std::string field = nb::cast<std::string>(key);
      out.field_schema.emplace(field, schema_from_python(field, value));
    }
  }
  if (meta.contains("field_status") && !meta["field_status"].is_none()) {
    auto status = nb::cast<nb::ndarray<const bool, nb::ndim<2>, nb::c_contig, nb::device::cpu>>(
        meta["field_status"]);
    if (status.shape(0) != out.size() || status.shape(1) != out.field_schema.size()) {
      throw_invalid("field_status must have shape (" + std::to_string(out.size()) + ", " +
                    std::to_string(out.field_schema.size()) + "), got (" + std::to_string(status.shape(0)) +
                    ", " + std::to_string(status.shape(1)) + ")");
    }
    const auto* bits = reinterpret_cast<const uint8_t*>(status.data());
    out.production_status.assign(bits, bits + status.shape(0) * status.shape(1));
  }
  if (meta.contains("custom_meta_encoded") && !meta["custom_meta_encoded"].is_none()) {
    auto encoded = nb::cast<nb::tuple>(meta["custom_meta_encoded"]);
    out.custom_meta = custom_meta_from_encoded(nb::cast<nb::bytes>(encoded[0]), nb::cast<OffsetsInput>(encoded[1]));
  } else if (meta.contains("custom_meta") && !meta["custom_meta"].is_none()) {
    for (const Json& object : custom_meta_from_python(meta["custom_meta"])) out.custom_meta.push_back(object);
  }
  if (meta.contains("extra_info") && !meta["extra_info"].is_none()) {
    out.extra_info = to_json(meta["extra_info"], "extra_info");
  }
  return out;
}

}  // namespace seqflow::bindings
