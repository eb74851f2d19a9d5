// The engine's columns of a batch (seqflow::BatchMeta) in Python: bound as
// _seqflow._NativeBatchMeta, which the client bindings take and return, and
// moved into or copied out of seqflow.BatchMeta (batch_meta_object.h), whose
// base class it is. custom_meta crosses as MessagePack, decoded on first read.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <map>
#include <span>
#include <string_view>
#include <type_traits>

#include "bindings/arrays.h"
#include "bindings/batch_meta_conversion.h"
#include "bindings/batch_meta_object.h"
#include "bindings/checks.h"
#include "bindings/field_schema.h"
#include "bindings/json_conversion.h"
#include "bindings/msgpack_conversion.h"
#include "bindings/submodules.h"
#include "core/name_rule.h"
#include "seqflow/batch_meta.h"
#include "seqflow/error.h"

namespace nb = nanobind;

namespace seqflow::bindings {
namespace {

using Int8Array = nb::ndarray<nb::numpy, int8_t, nb::ndim<1>>;
using BoolInput = nb::ndarray<const bool, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

nb::dict schema_to_python(const FieldSchema& schema) {
  nb::dict out;
  // A non-tensor field has no dtype or shape (None, as in TransferQueue):
  // how the engine stores its objects is private.
  if (schema.is_object) {
    out["dtype"] = nb::none();
    out["shape"] = nb::none();
  } else {
    out["dtype"] = std::string(seqflow::dtype_name(schema.dtype));
    nb::list shape;
    for (int64_t d : schema.shape) shape.append(d);
    out["shape"] = nb::tuple(shape);
  }
  out["is_nested"] = schema.is_nested;
  out["is_non_tensor"] = schema.is_object;
  return out;
}

// One entry of seqflow.BatchMeta's field_schema as the engine reads it (the dtype by name).
FieldSchema schema_from_python(const std::string& field, nb::handle entry) {
  if (!is_mapping(entry)) throw_invalid("field_schema[\"" + field + "\"] must be a dict");
  nb::object get = entry.attr("get");
  FieldSchema schema;
  nb::object dtype = dtype_name(get("dtype"));
  if (!dtype.is_none()) schema.dtype = parse_dtype(nb::cast<std::string>(nb::str(dtype)));
  nb::object shape = get("shape");
  if (!shape.is_none()) {
    for (nb::handle d : shape) schema.shape.push_back(nb::cast<int64_t>(d));
  }
  schema.is_nested = nb::cast<bool>(get("is_nested", false));
  schema.is_object = nb::cast<bool>(get("is_non_tensor", false));
  return schema;
}

// TransferQueue's production_status: one int8 per sample, 1 when it has every field.
Int8Array sample_status(const BatchMeta& meta) {
  const std::vector<uint8_t> ready = meta.ready();
  return to_numpy(std::vector<int8_t>(ready.begin(), ready.end()));
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

// Encoded custom_meta as the caller gives it (_encoded_meta, pickles): the
// offsets are checked, the entries only when they go to the engine.
CustomMetaList custom_meta_unchecked(nb::handle encoded, size_t samples) {
  auto pair = nb::cast<nb::tuple>(encoded);
  auto bytes = nb::cast<nb::bytes>(pair[0]);
  auto offsets = nb::cast<OffsetsInput>(pair[1]);
  const std::span<const uint32_t> bounds(offsets.data(), offsets.shape(0));
  CustomMetaList::check_offsets(bytes.size(), bounds);
  if (bounds.size() != samples + 1) {
    throw_invalid("custom_meta offsets must hold " + std::to_string(samples + 1) + " entries, got " +
                  std::to_string(bounds.size()));
  }
  CustomMetaList out;
  out.reserve(samples, bytes.size());
  const std::string_view all(bytes.c_str(), bytes.size());
  for (size_t i = 0; i < samples; ++i) out.push_back_encoded(all.substr(bounds[i], bounds[i + 1] - bounds[i]));
  return out;
}

nb::tuple encoded_to_python(const BatchMeta& meta) {
  const CustomMetaList list = meta.custom_meta.empty() ? CustomMetaList(meta.size()) : meta.custom_meta;
  std::vector<uint32_t> offsets = list.offsets();
  return nb::make_tuple(nb::bytes(list.bytes().data(), list.bytes().size()), to_numpy(std::move(offsets)));
}

// {field: [version per sample]} of the overwritten fields.
nb::dict versions_to_python(const BatchMeta& meta) {
  nb::dict out;
  for (const auto& [field, per_sample] : meta.versions) out[field.c_str()] = int_list(per_sample);
  return out;
}

nb::list partitions_to_python(const PartitionIdList& ids) {
  nb::list out;
  for (size_t r = 0, begin = 0; r < ids.run_count(); begin = ids.run_end(r++)) {
    nb::str name(ids.run_name(r).data(), ids.run_name(r).size());  // one str per run
    for (size_t i = begin; i < ids.run_end(r); ++i) out.append(name);
  }
  return out;
}

std::vector<std::string> strings_of(nb::handle values) {
  std::vector<std::string> out;
  for (nb::handle value : values) out.push_back(nb::cast<std::string>(value));
  return out;
}

void check_length(size_t got, size_t samples, const char* name) {
  if (got != samples) {
    throw_invalid(std::string(name) + " has " + std::to_string(got) + " entries for " + std::to_string(samples) +
                  " samples");
  }
}

// The matrix of `meta`'s fields as `status` gives it (samples x fields, in
// field_schema order).
void set_status(BatchMeta& meta, const std::optional<BoolInput>& status) {
  meta.production_status.clear();
  if (!status) return;
  if (status->shape(0) != meta.size() || status->shape(1) != meta.field_schema.size()) {
    throw_invalid("field_status must have shape (" + std::to_string(meta.size()) + ", " +
                  std::to_string(meta.field_schema.size()) + "), got (" + std::to_string(status->shape(0)) + ", " +
                  std::to_string(status->shape(1)) + ")");
  }
  const auto* bits = reinterpret_cast<const uint8_t*>(status->data());
  meta.production_status.assign(bits, bits + status->shape(0) * status->shape(1));
}

std::vector<std::string> field_names_of(const BatchMeta& meta) {
  std::vector<std::string> names;
  for (const auto& entry : meta.field_schema) names.push_back(entry.first);
  return names;
}

}  // namespace

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

nb::list decode_custom_meta(const BatchMeta& meta) {
  nb::tuple encoded = encoded_to_python(meta);
  return decode_custom_meta(nb::cast<nb::bytes>(encoded[0]), nb::cast<OffsetsInput>(encoded[1]));
}

std::vector<Value> custom_meta_from_python(nb::handle value) {
  std::vector<Value> out;
  if (value.is_none()) return out;
  size_t i = 0;
  for (nb::handle item : value) {
    const std::string where = "custom_meta[" + std::to_string(i) + "]";
    if (!PyDict_Check(item.ptr())) {
      throw_invalid(where + " must be a dict, got " + std::string(nb::type_name(item.type()).c_str()));
    }
    Value entry = to_value(item, where);
    // Top-level keys follow the name rule, as tags' keys do (a NUL would cut them short).
    for (const auto& member : entry.as_object()) core::check_name(member.first, where + " key");
    out.push_back(std::move(entry));
    ++i;
  }
  return out;
}

BoolMatrix bool_matrix(std::vector<uint8_t>&& values, size_t rows, size_t columns) {
  auto* owned = new std::vector<uint8_t>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  return BoolMatrix(reinterpret_cast<bool*>(owned->data()), {rows, columns}, owner);
}

int64_t count_of(nb::handle value, const char* name) {
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr())) {
    throw_invalid(std::string(name) + " must be an integer >= 1, got " + nb::cast<std::string>(nb::repr(value)));
  }
  const int64_t count = nb::cast<int64_t>(nb::int_(value));
  if (count < 1) throw_invalid(std::string(name) + " must be an integer >= 1, got " + std::to_string(count));
  return count;
}

PyBatchMeta from_native(BatchMeta&& native, nb::handle extra_info) {
  PyBatchMeta out;
  static_cast<BatchMeta&>(out) = std::move(native);
  nb::dict schema;
  for (const auto& [field, entry] : out.field_schema) schema[field.c_str()] = schema_to_python(entry);
  out.py_field_schema = std::move(schema);
  out.py_production_status = nb::cast(sample_status(out));
  const bool given = !extra_info.is_none() && PyObject_IsTrue(extra_info.ptr()) == 1;
  out.py_extra_info = given ? dict_of(extra_info) : nb::dict();
  out.py_custom_meta = nb::none();
  out.py_backend_meta = nb::none();
  return out;
}

BatchMeta to_native(const PyBatchMeta& meta, bool custom_meta) {
  nb::list names = sorted_names(meta.py_field_schema);
  BatchMeta out = static_cast<const BatchMeta&>(meta);
  out.field_schema.clear();
  for (nb::handle name : names) {
    const std::string field = nb::cast<std::string>(name);
    out.field_schema.emplace(field, schema_from_python(field, meta.py_field_schema[name]));
  }
  std::vector<uint8_t> bits = field_produced(meta, names);
  set_status(out, BoolInput(bits.data(), {meta.size(), out.field_schema.size()}));
  if (custom_meta && !meta.py_custom_meta.is_none()) {
    out.custom_meta = CustomMetaList();
    for (const Value& object : custom_meta_from_python(meta.py_custom_meta)) out.custom_meta.push_back(object);
  } else {
    // Bytes a caller may have set: checked before the engine reads them.
    out.custom_meta = CustomMetaList::from_encoded(meta.custom_meta.bytes(), meta.custom_meta.offsets());
  }
  return out;
}

nb::tuple columns_state(const BatchMeta& meta) {
  const std::vector<std::string> names = field_names_of(meta);
  nb::object generations = meta.generations.empty() ? nb::object(nb::none()) : nb::object(int_list(meta.generations));
  return nb::make_tuple(to_numpy(std::vector<int64_t>(meta.global_indexes)), partitions_to_python(meta.partition_ids),
                        generations, names, bool_matrix(meta.field_produced(names), meta.size(), names.size()),
                        encoded_to_python(meta), versions_to_python(meta));
}

BatchMeta columns_from_state(nb::handle state) {
  auto columns = nb::cast<nb::tuple>(state);
  // 6 entries: pickled before write versions existed.
  if (columns.size() != 6 && columns.size() != 7) {
    throw_invalid("a BatchMeta's columns state holds 6 or 7 entries, got " + repr_text(state));
  }
  BatchMeta meta;
  auto indexes = nb::cast<Int64Input>(columns[0]);
  meta.global_indexes.assign(indexes.data(), indexes.data() + indexes.shape(0));
  meta.partition_ids = PartitionIdList(strings_of(columns[1]));
  check_length(meta.partition_ids.size(), meta.size(), "partition_ids");
  if (!columns[2].is_none()) {
    meta.generations = nb::cast<std::vector<uint64_t>>(columns[2]);
    check_length(meta.generations.size(), meta.size(), "generations");
  }
  for (const std::string& name : strings_of(columns[3])) meta.field_schema.emplace(name, FieldSchema{});
  set_status(meta, nb::cast<BoolInput>(columns[4]));
  meta.custom_meta = custom_meta_unchecked(columns[5], meta.size());
  if (columns.size() == 7) {
    for (auto [field, per_sample] : nb::cast<nb::dict>(columns[6])) {
      std::vector<uint64_t> versions = nb::cast<std::vector<uint64_t>>(per_sample);
      check_length(versions.size(), meta.size(), "versions");
      meta.versions.emplace(nb::cast<std::string>(field), std::move(versions));
    }
  }
  return meta;
}

void bind_batch_meta(nb::module_ m) {
  using namespace nb::literals;
  m.def(
      "chunk_sizes",
      [](int64_t total, nb::handle parts) {
        if (total < 0) throw_invalid("total must be >= 0, got " + std::to_string(total));
        return chunk_sizes(static_cast<size_t>(total), count_of(parts, "parts"));
      },
      "total"_a, "parts"_a,
      "Sizes of `parts` consecutive chunks of `total` items: as equal as possible, the larger ones first "
      "(7 into 3 -> [3, 2, 2]).");

  nb::class_<BatchMeta>(m, "_NativeBatchMeta",
                        "The engine's columns of a batch, which the client bindings take and return; "
                        "seqflow.BatchMeta is a subclass.")
      .def_prop_ro("size", &BatchMeta::size, "Number of samples.")
      .def("__len__", &BatchMeta::size)
      .def_prop_ro("write_versions", &versions_to_python,
                   "Per overwritten field, the committed write each sample reads (0: its first write); fields never "
                   "overwritten are absent.")
      .def_prop_ro(
          "global_indexes", [](const BatchMeta& self) { return int_list(self.global_indexes); },
          "Per sample, its index in its partition.")
      .def_prop_rw(
          "partition_ids", [](const BatchMeta& self) { return partitions_to_python(self.partition_ids); },
          [](BatchMeta& self, nb::handle ids) {
            PartitionIdList list(strings_of(ids));
            check_length(list.size(), self.size(), "partition_ids");
            self.partition_ids = std::move(list);
          },
          "Per sample, its partition.")
      .def_prop_rw(
          "generations",
          [](const BatchMeta& self) {
            return self.generations.empty() ? nb::object(nb::none()) : nb::object(int_list(self.generations));
          },
          [](BatchMeta& self, std::optional<std::vector<uint64_t>> generations) {
            if (generations) check_length(generations->size(), self.size(), "generations");
            self.generations = generations.value_or(std::vector<uint64_t>{});
          },
          nb::arg("generations").none(),
          "Per sample, the generation the controller gave its global index; None when not known.")
      .def_prop_rw(
          "_encoded_meta", &encoded_to_python,
          [](BatchMeta& self, nb::handle encoded) { self.custom_meta = custom_meta_unchecked(encoded, self.size()); },
          "custom_meta as MessagePack bytes and uint32 offsets.");
  bind_batch_meta_object(m);
}

}  // namespace seqflow::bindings
