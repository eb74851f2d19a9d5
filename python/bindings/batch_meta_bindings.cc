// The engine's batch (seqflow::BatchMeta) as _seqflow.NativeBatchMeta, with
// typed parameters only: its columns read-only (numpy arrays, lists of str),
// its cutting and joining, and the engine's view a put and the joins take.
// seqflow.BatchMeta (python/seqflow/batch_meta.py) holds one beside the
// members that hold Python objects. custom_meta stays MessagePack here,
// decoded on the first read.
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings/arrays.h"
#include "bindings/batch_meta_conversion.h"
#include "bindings/submodules.h"
#include "seqflow/batch_meta.h"
#include "seqflow/error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {
namespace {

using BoolInput = nb::ndarray<const bool, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using BoolMatrix = nb::ndarray<nb::numpy, bool, nb::ndim<2>>;
using BoolVector = nb::ndarray<nb::numpy, bool, nb::ndim<1>>;
using ShapeList = std::vector<std::vector<int64_t>>;

// Bytes 0 or 1 as a numpy bool array of `shape`, owning them.
template <typename Array>
Array bool_array(std::vector<uint8_t>&& values, std::initializer_list<size_t> shape) {
  auto* owned = new std::vector<uint8_t>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  return Array(reinterpret_cast<bool*>(owned->data()), shape, owner);
}

void check_length(size_t got, size_t samples, const std::string& name) {
  if (got != samples) {
    throw_invalid(name + " has " + std::to_string(got) + " entries for " + std::to_string(samples) + " samples");
  }
}

// The samples x fields matrix of `meta`'s fields (in field_schema order), or none produced.
void set_produced(BatchMeta& meta, const std::optional<BoolInput>& produced) {
  meta.production_status.clear();
  if (!produced) return;
  if (produced->shape(0) != meta.size() || produced->shape(1) != meta.field_schema.size()) {
    throw_invalid("produced must have shape (" + std::to_string(meta.size()) + ", " +
                  std::to_string(meta.field_schema.size()) + "), got (" + std::to_string(produced->shape(0)) + ", " +
                  std::to_string(produced->shape(1)) + ")");
  }
  const auto* bits = reinterpret_cast<const uint8_t*>(produced->data());
  meta.production_status.assign(bits, bits + produced->shape(0) * produced->shape(1));
}

// custom_meta as the caller gives it (pickles): the offsets are checked, the
// entries when the engine reads them (engine_view).
CustomMetaList encoded_custom_meta(const nb::bytes& bytes, const OffsetsInput& offsets, size_t samples) {
  const std::span<const uint32_t> bounds(offsets.data(), offsets.shape(0));
  CustomMetaList::check_offsets(bytes.size(), bounds);
  check_length(bounds.size() - 1, samples, "custom_meta");
  CustomMetaList out;
  out.reserve(samples, bytes.size());
  const std::string_view all(bytes.c_str(), bytes.size());
  for (size_t i = 0; i < samples; ++i) out.push_back_encoded(all.substr(bounds[i], bounds[i + 1] - bounds[i]));
  return out;
}

const CustomMetaList& custom_meta_or_empty(const BatchMeta& meta, CustomMetaList& empty) {
  if (!meta.custom_meta.empty()) return meta.custom_meta;
  empty = CustomMetaList(meta.size());
  return empty;
}

BatchMeta make_batch(const Int64Input& global_indexes, const std::vector<std::string>& partition_ids,
                     const std::optional<UInt64Input>& generations, std::map<std::string, FieldSchema> field_schema,
                     const std::optional<BoolInput>& produced, const std::optional<nb::bytes>& custom_meta_bytes,
                     const std::optional<OffsetsInput>& custom_meta_offsets, FieldVersions write_versions) {
  BatchMeta meta;
  meta.global_indexes.assign(global_indexes.data(), global_indexes.data() + global_indexes.shape(0));
  check_length(partition_ids.size(), meta.size(), "partition_ids");
  meta.partition_ids = PartitionIdList(partition_ids);
  if (generations) {
    check_length(generations->shape(0), meta.size(), "generations");
    meta.generations.assign(generations->data(), generations->data() + generations->shape(0));
  }
  meta.field_schema = std::move(field_schema);
  set_produced(meta, produced);
  if (custom_meta_bytes.has_value() != custom_meta_offsets.has_value()) {
    throw_invalid("custom_meta_bytes and custom_meta_offsets go together");
  }
  if (custom_meta_bytes) meta.custom_meta = encoded_custom_meta(*custom_meta_bytes, *custom_meta_offsets, meta.size());
  for (const auto& [field, per_sample] : write_versions)
    check_length(per_sample.size(), meta.size(), "write_versions['" + field + "']");
  meta.versions = std::move(write_versions);
  return meta;
}

// The batch as the engine reads it: this field schema with these produced
// bits, and custom_meta re-encoded from the decoded dicts when given.
BatchMeta engine_view(const BatchMeta& self, std::map<std::string, FieldSchema> field_schema, const BoolInput& produced,
                      const std::optional<nb::typed<nb::list, nb::dict>>& custom_meta) {
  BatchMeta out;
  out.global_indexes = self.global_indexes;
  out.partition_ids = self.partition_ids;
  out.generations = self.generations;
  out.versions = self.versions;
  out.field_schema = std::move(field_schema);
  set_produced(out, produced);
  if (custom_meta) {
    for (const Value& object : custom_meta_from_python(*custom_meta)) out.custom_meta.push_back(object);
    check_length(out.custom_meta.size(), out.size(), "custom_meta");
  } else {
    // Bytes a caller may have set (a pickle): checked before the engine reads them.
    out.custom_meta = CustomMetaList::from_encoded(self.custom_meta.bytes(), self.custom_meta.offsets());
  }
  return out;
}

nb::list decoded_custom_meta(const BatchMeta& meta) {
  CustomMetaList empty;
  const CustomMetaList& list = custom_meta_or_empty(meta, empty);
  const std::vector<uint32_t>& offsets = list.offsets();
  return decode_custom_meta(nb::bytes(list.bytes().data(), list.bytes().size()),
                            OffsetsInput(offsets.data(), {offsets.size()}));
}

void bind_field_schema(nb::module_ m) {
  nb::class_<FieldSchema>(m, "NativeFieldSchema", "One field's entry of the engine's field_schema.")
      .def(
          "__init__",
          [](FieldSchema* self, const std::string& dtype, const std::vector<int64_t>& shape, bool is_nested,
             bool is_object) {
            new (self) FieldSchema{is_object ? DType::kUInt8 : parse_dtype(dtype), shape, is_nested, is_object};
          },
          "dtype"_a, "shape"_a, "is_nested"_a, "is_object"_a,
          "dtype by name (numpy's spelling; not read for an object field).")
      .def_prop_ro(
          "dtype", [](const FieldSchema& self) { return std::string(dtype_name(self.dtype)); }, "The element type.")
      .def_ro("shape", &FieldSchema::shape, "Per-sample shape (-1 where samples differ).")
      .def_ro("is_nested", &FieldSchema::is_nested, "Per-sample shapes differ.")
      .def_ro("is_object", &FieldSchema::is_object, "Opaque objects (TransferQueue's is_non_tensor).");
}

void bind_columns(nb::class_<BatchMeta>& cls) {
  cls.def_prop_ro("size", &BatchMeta::size, "Number of samples.")
      .def("__len__", &BatchMeta::size)
      .def_prop_ro(
          "global_indexes", [](const BatchMeta& self) { return view_of(self.global_indexes, self); }, kArray,
          "Per sample, its index in its partition (read-only).")
      .def_prop_ro(
          "partition_runs",
          [](const BatchMeta& self) {
            std::pair<std::vector<std::string>, std::vector<size_t>> runs;
            for (size_t r = 0, begin = 0; r < self.partition_ids.run_count(); begin = self.partition_ids.run_end(r++)) {
              runs.first.emplace_back(self.partition_ids.run_name(r));
              runs.second.push_back(self.partition_ids.run_end(r) - begin);
            }
            return runs;
          },
          "The partition ids as runs: (partition of each run, its sample count).")
      .def_prop_ro(
          "generations",
          [](const BatchMeta& self) {
            using View = decltype(view_of(self.generations, self));
            return self.generations.empty() ? std::optional<View>()
                                            : std::optional<View>(view_of(self.generations, self));
          },
          kArray, "Per sample, the generation the controller gave its global index (read-only); None when not known.")
      .def_prop_ro(
          "field_schema", [](const BatchMeta& self) { return self.field_schema; }, "The engine's entry of each field.")
      .def_prop_ro(
          "field_names",
          [](const BatchMeta& self) {
            std::vector<std::string> names;
            for (const auto& entry : self.field_schema) names.push_back(entry.first);
            return names;
          },
          "The fields, sorted.")
      .def_prop_ro(
          "custom_meta_bytes",
          [](const BatchMeta& self) {
            CustomMetaList empty;
            const std::string& bytes = custom_meta_or_empty(self, empty).bytes();
            return nb::bytes(bytes.data(), bytes.size());
          },
          "custom_meta as MessagePack, one entry per sample between custom_meta_offsets.")
      .def_prop_ro(
          "custom_meta_offsets",
          [](const BatchMeta& self) {
            CustomMetaList empty;
            return to_numpy(std::vector<uint32_t>(custom_meta_or_empty(self, empty).offsets()));
          },
          kArray, "size + 1 offsets into custom_meta_bytes.")
      .def_prop_ro(
          "custom_meta_encoded", [](const BatchMeta& self) { return !self.custom_meta.empty(); },
          "Whether any sample's custom_meta is held (all empty otherwise).")
      .def_ro("write_versions", &BatchMeta::versions,
              "Per overwritten field, the committed write each sample reads (0: its first write); fields never "
              "overwritten are absent.");
}

void bind_queries(nb::class_<BatchMeta>& cls) {
  cls.def(
         "field_produced",
         [](const BatchMeta& self, const std::vector<std::string>& names) {
           return bool_array<BoolMatrix>(self.field_produced(names), {self.size(), names.size()});
         },
         "names"_a, "(size, len(names)) bools: sample i has field names[j] (a field the batch lacks: nowhere).")
      .def(
          "ready",
          [](const BatchMeta& self) {
            std::vector<uint8_t> ready = self.ready();
            const size_t n = ready.size();
            return bool_array<BoolVector>(std::move(ready), {n});
          },
          "Per sample: it has every field (and there are fields).")
      .def("produced_fields", &BatchMeta::produced_fields, "The fields every sample has, sorted.")
      .def("decoded_custom_meta", &decoded_custom_meta, "custom_meta decoded afresh: one dict per sample.");
}

void bind_operations(nb::class_<BatchMeta>& cls) {
  cls.def(
         "select_samples",
         [](const BatchMeta& self, const Int64Input& positions) { return self.select_samples(as_span(positions)); },
         "positions"_a, "The samples at these positions (not global indexes) in [0, size), in this order.")
      .def("slice", &BatchMeta::slice, "begin"_a, "end"_a, "Samples [begin, end).")
      .def(
          "select_fields",
          [](const BatchMeta& self, const std::vector<std::string>& names) { return self.select_fields(names); },
          "names"_a, "The same samples with those of these fields the batch has.")
      .def(
          "split", [](const BatchMeta& self, const std::vector<int64_t>& sizes) { return self.split(sizes); },
          "sizes"_a, "Consecutive parts of these sizes (>= 0, adding up to size).")
      .def("partition_positions", &BatchMeta::partition_positions,
           "The positions of each partition's samples, partitions in order of first appearance.")
      .def(
          "reorder", [](BatchMeta& self, const Int64Input& positions) { self.reorder(as_span(positions)); },
          "positions"_a, "The samples in the order of these positions (a permutation of 0..size-1), in place.")
      .def_static(
          "concat",
          [](const std::vector<const BatchMeta*>& parts, bool validate) { return BatchMeta::concat(parts, validate); },
          "parts"_a, "validate"_a,
          "The samples of all parts, in order (empty ones skipped); with validate, every part must have the same "
          "fields with the same dtypes.")
      .def("union_with", &BatchMeta::union_with, "other"_a,
           "The same samples with the fields of both (other's schema and custom_meta keys win).")
      .def("engine_view", &engine_view, "field_schema"_a, "produced"_a, "custom_meta"_a.none(),
           "The batch with this field schema and these produced bits (samples x fields, in field_schema order); "
           "custom_meta encoded from these dicts when given, else the held bytes, checked.")
      .def(
          "copy", [](const BatchMeta& self) { return BatchMeta(self); }, "A copy.");
}

}  // namespace

void bind_batch_meta(nb::module_ m) {
  m.def(
      "chunk_sizes",
      [](int64_t total, int64_t parts) {
        if (total < 0) throw_invalid("total must be >= 0, got " + std::to_string(total));
        return chunk_sizes(static_cast<size_t>(total), parts);
      },
      "total"_a, "parts"_a,
      "Sizes of `parts` consecutive chunks of `total` items: as equal as possible, the larger ones first "
      "(7 into 3 -> [3, 2, 2]).");
  m.def(
      "common_shape", [](const ShapeList& shapes) { return common_shape(shapes); }, "shapes"_a,
      "The shape joined batches report for a field of these shapes: -1 in each dim where they differ, every dim "
      "of the longest when their ranks differ.");
  bind_field_schema(m);
  nb::class_<BatchMeta> cls(m, "NativeBatchMeta",
                            "The engine's batch: its columns and the operations that cut and join them. "
                            "seqflow.BatchMeta holds one.");
  cls.def(
      "__init__",
      [](BatchMeta* self, const Int64Input& global_indexes, const std::vector<std::string>& partition_ids,
         const std::optional<UInt64Input>& generations, std::map<std::string, FieldSchema> field_schema,
         const std::optional<BoolInput>& produced, const std::optional<nb::bytes>& custom_meta_bytes,
         const std::optional<OffsetsInput>& custom_meta_offsets, FieldVersions write_versions) {
        new (self) BatchMeta(make_batch(global_indexes, partition_ids, generations, std::move(field_schema), produced,
                                        custom_meta_bytes, custom_meta_offsets, std::move(write_versions)));
      },
      "global_indexes"_a, "partition_ids"_a, "generations"_a.none() = nb::none(),
      "field_schema"_a = std::map<std::string, FieldSchema>(), "produced"_a.none() = nb::none(),
      "custom_meta_bytes"_a.none() = nb::none(), "custom_meta_offsets"_a.none() = nb::none(),
      "write_versions"_a = FieldVersions(),
      "A batch of these columns (one entry per sample each); produced: samples x fields in field_schema order "
      "(None: nothing produced); custom_meta as MessagePack with size + 1 offsets (None: all empty).");
  bind_columns(cls);
  bind_queries(cls);
  bind_operations(cls);
}

}  // namespace seqflow::bindings
