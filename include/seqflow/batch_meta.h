// BatchMeta: which samples a batch holds and what is known about them
// (TransferQueue's metadata object), and the operations that cut, join and
// reorder batches. Columnar: one entry per sample in each member.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqflow/custom_meta_list.h"
#include "seqflow/field_versions.h"
#include "seqflow/partition_id_list.h"
#include "seqflow/tensor.h"
#include "seqflow/value.h"

namespace seqflow {

// TransferQueue's field_schema entry.
struct FieldSchema {
  DType dtype = DType::kUInt8;
  Shape shape;             // per-sample shape when all samples share it
  bool is_nested = false;  // per-sample shapes differ (variable length)
  bool is_object = false;  // opaque objects (TransferQueue: is_non_tensor)

  bool operator==(const FieldSchema&) const = default;
};

// Sizes of `parts` consecutive chunks of `total` items: as equal as possible,
// the larger ones first (7 into 3: 3, 2, 2). Data and metadata split by this
// one rule. Throws kInvalidArgument unless parts >= 1.
std::vector<size_t> chunk_sizes(size_t total, int64_t parts);

// The shape joined batches report for a field whose parts (or samples) have
// these shapes: -1 in each dim where they differ, every dim of the longest
// when their ranks differ. Throws kInvalidArgument for no shapes.
Shape common_shape(std::span<const Shape> shapes);

struct BatchMeta {
  std::vector<int64_t> global_indexes;
  PartitionIdList partition_ids;  // one per sample
  // One per sample: the generation the controller gave its global index
  // when it allocated it (it changes whenever the index is reused). Empty:
  // not known (a BatchMeta built by hand), checked by partition only.
  std::vector<uint64_t> generations;
  std::map<std::string, FieldSchema> field_schema;
  // size() rows of field_schema.size() bytes (fields in field_schema order,
  // by name): 1 when the sample's field is produced. Empty: none is.
  std::vector<uint8_t> production_status;
  CustomMetaList custom_meta;  // one object per sample, or none (all empty)
  // Echoed by the wire only; the Python layer keeps its own (any objects).
  Value extra_info = Value::object();
  // The committed write each sample's overwritten fields hold (one entry
  // per sample for each field named); a get reads those, or a newer
  // committed value where the unit holds one. Fields never overwritten are absent.
  FieldVersions versions = {};
  // The fetch lease that holds these samples (MetaRequest::lease), which
  // acknowledging or releasing them names; 0: none. A batch made from it
  // (cut, joined, selected) names none: ending its leases then ends the
  // task's leases of its samples whoever took them.
  uint64_t lease = 0;

  size_t size() const { return global_indexes.size(); }
  bool produced(size_t sample, size_t field) const {
    return !production_status.empty() && production_status[sample * field_schema.size() + field] != 0;
  }
  // Sample i's custom_meta as MessagePack; empty for {}.
  std::string_view custom_meta_of(size_t i) const {
    return custom_meta.empty() ? std::string_view() : custom_meta.encoded(i);
  }

  // Per sample: 1 when it has every field (and there are fields).
  std::vector<uint8_t> ready() const;
  // Per sample, per name (row-major): 1 when the sample has that field; a
  // name outside field_schema is produced nowhere.
  std::vector<uint8_t> field_produced(std::span<const std::string> names) const;
  // The fields every sample has, sorted.
  std::vector<std::string> produced_fields() const;

  // The samples at these positions (not global indexes), in this order.
  // Throws kInvalidArgument naming `sample_indices` for one outside [0, size()).
  BatchMeta select_samples(std::span<const int64_t> positions) const;
  // Samples [begin, end): select_samples of a run, without a position list.
  BatchMeta slice(size_t begin, size_t end) const;
  // The same samples with those of `names` the batch has.
  BatchMeta select_fields(std::span<const std::string> names) const;
  // Consecutive parts of chunk_sizes(size(), chunks) samples.
  std::vector<BatchMeta> chunk(int64_t chunks) const;
  // Consecutive parts of these sizes (>= 0, adding up to size()).
  std::vector<BatchMeta> split(std::span<const int64_t> sizes) const;
  // One part per partition, in order of first appearance.
  std::vector<BatchMeta> chunk_by_partition() const;
  // The positions of each of those parts.
  std::vector<std::vector<int64_t>> partition_positions() const;
  // The samples in the order of `positions`, a permutation of 0..size()-1.
  void reorder(std::span<const int64_t> positions);

  // The samples of all parts, in order (empty parts skipped). With
  // `validate`, every part must have the same fields with the same dtypes.
  // Schema: the first part's; a field nested in any part is nested, its
  // shape -1 where parts differ. A field a part lacks is not produced there.
  // Generations: 0 for a part without any (checked by partition only).
  static BatchMeta concat(std::span<const BatchMeta* const> parts, bool validate);
  // The same samples with the fields of both (other's schema wins on a
  // clash; a field's produced bits come from the side whose schema wins) and
  // custom_meta merged key by key (other's keys win). An empty side gives
  // the other. Throws kInvalidArgument unless both name the same samples.
  BatchMeta union_with(const BatchMeta& other) const;
};

}  // namespace seqflow
