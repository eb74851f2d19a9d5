// The C++ samplers behind seqflow.samplers' built-in classes (which the
// controller runs under its lock, without Python), and their direct calls
// (sampler.sample(ready, batch_size, **kwargs) in Python), which read custom
// metadata from a dict and group samples as TransferQueue 0.1.11 does.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bindings/arrays.h"
#include "bindings/json_conversion.h"
#include "bindings/samplers.h"
#include "seqflow/sampler.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

// Custom metadata from a dict, for running a sampler outside a controller.
// Groups without "group_id" are TransferQueue's: in the ready indexes sorted
// ascending, each run of n consecutive indexes, taken greedily from the
// smallest. lengths_known is false when the caller gave no metadata at all.
class MapSampleInfo final : public SampleInfo {
 public:
  MapSampleInfo(std::unordered_map<int64_t, Value> meta, std::span<const int64_t> ready, bool lengths_known)
      : meta_(std::move(meta)), ready_(ready.begin(), ready.end()), lengths_known_(lengths_known) {}

  std::optional<int64_t> length(int64_t global_index) const override {
    const Value* length = custom_meta(global_index).find("total_lengths");
    if (length == nullptr || length->type() != Value::Type::kInt) return std::nullopt;
    return length->as_int();
  }

  std::string group_key(int64_t global_index, int64_t n) const override {
    if (const Value* group = custom_meta(global_index).find("group_id")) return "id:" + group->dump();
    if (n != runs_of_n_) find_runs(n);
    auto run = run_of_.find(global_index);
    return run == run_of_.end() ? "alone:" + std::to_string(global_index) : "run:" + std::to_string(run->second);
  }

  const Value& custom_meta(int64_t global_index) const override {
    static const Value kEmpty = Value::object();
    auto it = meta_.find(global_index);
    return it == meta_.end() ? kEmpty : it->second;
  }

  bool has_lengths() const override { return lengths_known_; }

 private:
  // TransferQueue's scan: slide over the sorted indexes; a window of n
  // consecutive values is a group and the scan jumps past it.
  void find_runs(int64_t n) const {
    std::vector<int64_t> sorted;
    for (int64_t index : ready_) {
      if (!custom_meta(index).contains("group_id")) sorted.push_back(index);
    }
    std::sort(sorted.begin(), sorted.end());
    run_of_.clear();
    runs_of_n_ = n;
    const auto size = static_cast<int64_t>(sorted.size());
    for (int64_t i = 0; i + n <= size;) {
      bool consecutive = true;
      for (int64_t j = i; j + 1 < i + n && consecutive; ++j) consecutive = sorted[j + 1] - sorted[j] == 1;
      if (!consecutive) {
        ++i;
        continue;
      }
      for (int64_t j = i; j < i + n; ++j) run_of_.emplace(sorted[j], i);
      i += n;
    }
  }

  std::unordered_map<int64_t, Value> meta_;
  std::vector<int64_t> ready_;
  bool lengths_known_;
  mutable int64_t runs_of_n_ = 0;
  mutable std::unordered_map<int64_t, int64_t> run_of_;
};

// One direct call of a C++ sampler (not while a client uses it). dp_rank
// None: the caller named no rank (GRPOGroupNSampler then keeps no answer for
// it). `custom_meta`: {global index: custom_meta} (None: the caller gave no
// metadata at all).
std::vector<int64_t> sample_directly(Sampler& sampler, const Int64Input& ready, int64_t batch_size,
                                     const std::string& partition_id, const std::string& task_name,
                                     std::optional<int64_t> dp_rank, int64_t batch_index,
                                     std::optional<nb::dict> custom_meta) {
  std::unordered_map<int64_t, Value> meta;
  if (custom_meta) {
    for (auto [key, value] : *custom_meta) {
      meta.insert_or_assign(nb::cast<int64_t>(key),
                            to_value(value, "custom_meta[" + std::string(nb::str(key).c_str()) + "]"));
    }
  }
  MapSampleInfo info(std::move(meta), as_span(ready), custom_meta.has_value());
  SampleRequest request;
  request.ready = as_span(ready);
  request.batch_size = batch_size;
  request.partition_id = partition_id;
  request.task_name = task_name;
  request.sampling = {dp_rank.value_or(0), batch_index, dp_rank.has_value()};
  request.info = &info;
  return sampler.sample(request).sampled;
}

}  // namespace

void bind_builtin_samplers(nb::module_ m) {
  m.def("sequential_sampler", &make_sequential_sampler);
  m.def("grpo_group_n_sampler", &make_grpo_group_n_sampler, "n_samples_per_prompt"_a);
  m.def("rank_aware_sampler", &make_rank_aware_sampler);
  m.def("seqlen_balanced_sampler", &make_seqlen_balanced_sampler, "n_samples_per_prompt"_a, "dp_size"_a, "algorithm"_a,
        "default_length"_a, "workload"_a, "default_length -1: a sample without total_lengths is an error.");
  m.def("token_budget_sampler", &make_token_budget_sampler, "max_tokens"_a, "n_samples_per_prompt"_a, "dp_size"_a,
        "default_length"_a, "workload"_a);
  m.def("sample_directly", &sample_directly, "sampler"_a, "ready"_a, "batch_size"_a, "partition_id"_a, "task_name"_a,
        "dp_rank"_a.none(), "batch_index"_a, "custom_meta"_a.none(),
        "The samples a C++ sampler hands this caller, outside a controller: samples without "
        "custom_meta[\"group_id\"] form TransferQueue's groups (runs of n consecutive global indexes).");
}

}  // namespace seqflow::bindings
