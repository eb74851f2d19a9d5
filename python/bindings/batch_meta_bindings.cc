// seqflow's BatchMeta as a Python class (seqflow.BatchMeta subclasses it):
// the columns and their operations are C++; the Python subclass adds what
// holds Python objects (field_schema's dtypes as given, extra_info, custom_meta
// once decoded). Underscored methods are that subclass's.
#include "bindings/batch_meta_conversion.h"

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
#include "bindings/json_conversion.h"
#include "bindings/msgpack_conversion.h"
#include "bindings/submodules.h"
#include "core/name_rule.h"
#include "seqflow/batch_meta.h"
#include "seqflow/error.h"

namespace nb = nanobind;

namespace seqflow::bindings {
namespace {

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

using BoolInput = nb::ndarray<const bool, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// Encoded custom_meta as the caller gives it (Python's _encoded_meta): the
// offsets are checked, the entries only when they go to the engine.
CustomMetaList custom_meta_unchecked(nb::bytes bytes, const OffsetsInput& offsets, size_t samples) {
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

std::vector<int64_t> positions_of(const Int64Input& positions) {
  return {positions.data(), positions.data() + positions.shape(0)};
}

// A count argument (chunks, parts): an int >= 1, not a bool; ValueError naming it.
int64_t count_of(nb::handle value, const char* name) {
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr())) {
    throw_invalid(std::string(name) + " must be an integer >= 1, got " + nb::cast<std::string>(nb::repr(value)));
  }
  const int64_t count = nb::cast<int64_t>(nb::int_(value));
  if (count < 1) throw_invalid(std::string(name) + " must be an integer >= 1, got " + std::to_string(count));
  return count;
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

void check_count(size_t got, size_t samples, const char* name) {
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
  m.def(
      "check_chunks", [](nb::handle chunks) { return count_of(chunks, "chunks"); }, "chunks"_a);

  nb::class_<BatchMeta>(m, "BatchMeta", "The C++ columns of seqflow.BatchMeta and their operations.")
      .def(nb::init<>())
      .def(
          "__init__", [](BatchMeta* self, BatchMeta& native) { new (self) BatchMeta(std::move(native)); }, "native"_a,
          "Takes over `native`'s columns (left empty).")
      .def(
          "__init__",
          [](BatchMeta* self, const Int64Input& global_indexes, nb::handle partition_ids,
             const std::optional<UInt64Input>& generations, nb::handle field_names,
             const std::optional<BoolInput>& field_status, nb::handle custom_meta_encoded) {
            BatchMeta meta;
            meta.global_indexes.assign(global_indexes.data(), global_indexes.data() + global_indexes.shape(0));
            meta.partition_ids = PartitionIdList(strings_of(partition_ids));
            check_count(meta.partition_ids.size(), meta.size(), "partition_ids");
            const auto known = as_span(generations);
            meta.generations.assign(known.begin(), known.end());
            if (!meta.generations.empty()) check_count(meta.generations.size(), meta.size(), "generations");
            for (const std::string& name : strings_of(field_names)) meta.field_schema.emplace(name, FieldSchema{});
            set_status(meta, field_status);
            if (!custom_meta_encoded.is_none()) {
              auto encoded = nb::cast<nb::tuple>(custom_meta_encoded);
              meta.custom_meta = custom_meta_unchecked(nb::cast<nb::bytes>(encoded[0]),
                                                       nb::cast<OffsetsInput>(encoded[1]), meta.size());
            }
            new (self) BatchMeta(std::move(meta));
          },
          "global_indexes"_a, "partition_ids"_a, "generations"_a.none(), "field_names"_a, "field_status"_a.none(),
          "custom_meta_encoded"_a.none())
      .def_prop_ro("size", &BatchMeta::size, "Number of samples.")
      .def("__len__", &BatchMeta::size)
      .def_prop_ro("global_indexes", [](const BatchMeta& self) { return int_list(self.global_indexes); })
      .def_prop_rw(
          "partition_ids", [](const BatchMeta& self) { return partitions_to_python(self.partition_ids); },
          [](BatchMeta& self, nb::handle ids) {
            PartitionIdList list(strings_of(ids));
            check_count(list.size(), self.size(), "partition_ids");
            self.partition_ids = std::move(list);
          })
      .def_prop_rw(
          "generations",
          [](const BatchMeta& self) {
            return self.generations.empty() ? nb::object(nb::none()) : nb::object(int_list(self.generations));
          },
          [](BatchMeta& self, std::optional<std::vector<uint64_t>> generations) {
            if (generations) check_count(generations->size(), self.size(), "generations");
            self.generations = generations.value_or(std::vector<uint64_t>{});
          },
          nb::arg("generations").none(),
          "Per sample, the generation the controller gave its global index; None when not known.")
      .def_prop_rw(
          "_encoded_meta", &encoded_to_python,
          [](BatchMeta& self, nb::tuple encoded) {
            self.custom_meta =
                custom_meta_unchecked(nb::cast<nb::bytes>(encoded[0]), nb::cast<OffsetsInput>(encoded[1]), self.size());
          },
          "custom_meta as MessagePack bytes and uint32 offsets.")
      .def("_decode_custom_meta",
           [](const BatchMeta& self) {
             nb::tuple encoded = encoded_to_python(self);
             return decode_custom_meta(nb::cast<nb::bytes>(encoded[0]), nb::cast<OffsetsInput>(encoded[1]));
           })
      .def("_ready", &sample_status, "One int8 per sample: 1 when it has every field.")
      .def_prop_ro("_field_names",
                   [](const BatchMeta& self) {
                     std::vector<std::string> names;
                     for (const auto& entry : self.field_schema) names.push_back(entry.first);
                     return names;
                   })
      .def(
          "_field_status",
          [](const BatchMeta& self, nb::handle names) {
            const std::vector<std::string> fields = strings_of(names);
            return bool_matrix(self.field_produced(fields), self.size(), fields.size());
          },
          "names"_a, "(size, len(names)) bools: the engine's word on each sample's fields.")
      .def("_schema_dict",
           [](const BatchMeta& self) {
             nb::dict out;
             for (const auto& [field, entry] : self.field_schema) out[field.c_str()] = schema_to_python(entry);
             return out;
           })
      .def(
          "_with_fields",
          [](const BatchMeta& self, nb::dict field_schema, const std::optional<BoolInput>& field_status,
             nb::handle custom_meta) {
            BatchMeta out = self;
            out.field_schema.clear();
            for (auto [key, value] : field_schema) {
              const std::string field = nb::cast<std::string>(key);
              out.field_schema.emplace(field, schema_from_python(field, value));
            }
            set_status(out, field_status);
            if (custom_meta.is_none()) {
              // Bytes a caller may have set: checked before the engine reads them.
              out.custom_meta = CustomMetaList::from_encoded(self.custom_meta.bytes(), self.custom_meta.offsets());
            } else {
              out.custom_meta = CustomMetaList();
              for (const Value& object : custom_meta_from_python(custom_meta)) out.custom_meta.push_back(object);
            }
            return out;
          },
          "field_schema"_a, "field_status"_a.none(), "custom_meta"_a.none(),
          "A copy with this schema (dtype names), field matrix and custom_meta (None: the encoded one, checked).")
      .def("_select", [](const BatchMeta& self, const Int64Input& at) { return self.select_samples(positions_of(at)); })
      .def("_slice", &BatchMeta::slice)
      .def("_select_fields",
           [](const BatchMeta& self, const std::vector<std::string>& names) { return self.select_fields(names); })
      .def("_reorder", [](BatchMeta& self, const Int64Input& at) { self.reorder(positions_of(at)); })
      .def("_union", &BatchMeta::union_with)
      .def_static("_concat", [](const std::vector<const BatchMeta*>& parts,
                                bool validate) { return BatchMeta::concat(parts, validate); })
      .def("_partition_positions", [](const BatchMeta& self) {
        nb::list out;
        for (auto& positions : self.partition_positions()) out.append(to_numpy(std::move(positions)));
        return out;
      });
}

}  // namespace seqflow::bindings
