// Samplers in Python. The controller calls a sampler under its own lock, with
// the GIL released (every binding releases it before calling in), so the
// adapter below can take the GIL to call Python without a deadlock.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <unordered_map>

#include "bindings/arguments.h"
#include "bindings/arrays.h"
#include "bindings/gil.h"
#include "bindings/json_conversion.h"
#include "bindings/samplers.h"
#include "seqflow/error.h"
#include "seqflow/sampler.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

// What a Python sampler may ask about samples, during its call only. Given
// as `sample_info` and, for samplers written for TransferQueue, as
// `partition` (its DataPartitionStatus: partition_id, get_custom_meta).
struct SampleInfoHandle {
  const SampleInfo* info = nullptr;
  std::string partition_id;

  const SampleInfo& get() const {
    if (info == nullptr) {
      throw Error(ErrorCode::kInternal, "sample_info is usable only during the sample() call it came with");
    }
    return *info;
  }
};

ErrorCode code_of(const nb::python_error& error) {
  if (error.matches(PyExc_ValueError)) return ErrorCode::kInvalidArgument;
  if (error.matches(PyExc_KeyError)) return ErrorCode::kNotFound;
  if (error.matches(PyExc_TimeoutError)) return ErrorCode::kTimeout;
  return ErrorCode::kInternal;
}

std::vector<int64_t> index_list(nb::handle value, const std::string& what) {
  std::vector<int64_t> out;
  if (!nb::try_cast(value, out)) {
    throw_invalid(what + " must be a sequence of ints, got " + nb::type_name(value.type()).c_str());
  }
  return out;
}

// The caller's sampling_config as TransferQueue hands it to samplers: every
// key the caller gave, dp_rank only when given; batch_index always.
nb::dict sampling_kwargs(const SamplingConfig& sampling) {
  nb::dict kwargs;
  if (sampling.extra.is_object()) {
    for (const auto& [key, value] : sampling.extra.as_object()) {
      kwargs[nb::str(key.c_str(), key.size())] = from_value(value);
    }
  }
  if (sampling.dp_rank_given) kwargs["dp_rank"] = sampling.dp_rank;
  kwargs["batch_index"] = sampling.batch_index;
  return kwargs;
}

// A seqflow::Sampler that forwards to a Python object: sample(ready_indexes,
// batch_size, **kwargs) -> (sampled, consumed) as in TransferQueue (kwargs:
// the caller's sampling_config keys (sampling_kwargs); task_name and
// partition_id, the request's unless the caller's sampling_config names
// them, as TransferQueue's users do; sample_info, partition), and optionally
// reserved(config), clear(), state(), restore().
class PythonSampler final : public Sampler {
 public:
  explicit PythonSampler(nb::object target)
      : target_(std::move(target)), name_(nb::type_name(target_.type()).c_str()) {}

  ~PythonSampler() override {
    if (!Py_IsInitialized()) {
      target_.release();  // the interpreter is gone: nothing left to free
      return;
    }
    GilHeld gil;
    target_.reset();
  }

  std::string name() const override { return name_; }

  SampleResult sample(const SampleRequest& request) override {
    GilHeld gil;
    return guarded("sample", [&] {
      nb::list ready;
      for (int64_t index : request.ready) ready.append(index);
      nb::object info = nb::cast(SampleInfoHandle{request.info, request.partition_id});
      struct Invalidate {
        nb::handle handle;
        ~Invalidate() { nb::inst_ptr<SampleInfoHandle>(handle)->info = nullptr; }
      } invalidate{info};
      nb::dict kwargs = sampling_kwargs(request.sampling);
      if (!kwargs.contains("task_name")) kwargs["task_name"] = request.task_name;
      if (!kwargs.contains("partition_id")) kwargs["partition_id"] = request.partition_id;
      kwargs["sample_info"] = info;
      kwargs["partition"] = info;
      nb::object result = target_.attr("sample")(ready, request.batch_size, **kwargs);
      nb::tuple pair;
      if (!nb::try_cast(result, pair) || pair.size() != 2) {
        throw_invalid("sampler " + name_ + ".sample must return (sampled, consumed), got " +
                      nb::type_name(result.type()).c_str());
      }
      return SampleResult{index_list(pair[0], "sampler " + name_ + " sampled"),
                          index_list(pair[1], "sampler " + name_ + " consumed")};
    });
  }

  std::optional<std::vector<int64_t>> reserved(const std::string& partition_id, const std::string& task_name,
                                               const SamplingConfig& sampling) override {
    GilHeld gil;
    return guarded("reserved", [&]() -> std::optional<std::vector<int64_t>> {
      if (!nb::hasattr(target_, "reserved")) return std::nullopt;
      nb::object result = target_.attr("reserved")(partition_id, task_name, sampling_kwargs(sampling));
      if (result.is_none()) return std::nullopt;
      return index_list(result, "sampler " + name_ + ".reserved");
    });
  }

  void clear(const std::string& partition_id, const std::string* task_name) override {
    GilHeld gil;
    guarded("clear", [&] {
      if (!nb::hasattr(target_, "clear")) return 0;
      target_.attr("clear")(partition_id, task_name ? nb::object(nb::str(task_name->c_str())) : nb::none());
      return 0;
    });
  }

  Value state() const override {
    GilHeld gil;
    return guarded("state", [&]() -> Value {
      if (!nb::hasattr(target_, "state")) return Value::object();
      return to_value(target_.attr("state")(), "sampler " + name_ + " state");
    });
  }

  void restore(const Value& state) override {
    GilHeld gil;
    guarded("restore", [&] {
      if (nb::hasattr(target_, "restore")) target_.attr("restore")(from_value(state));
      return 0;
    });
  }

 private:
  // Python exceptions become seqflow errors (ValueError stays ValueError on
  // the way back), so the controller sees one error type.
  template <typename Fn>
  auto guarded(const char* method, Fn&& fn) const -> decltype(fn()) {
    try {
      return fn();
    } catch (nb::python_error& error) {
      throw Error(code_of(error), "sampler " + name_ + "." + method + " raised " + nb::type_name(error.type()).c_str() +
                                      ": " + nb::str(error.value()).c_str());
    } catch (nb::cast_error&) {
      throw_invalid("sampler " + name_ + "." + method + " returned a value of the wrong type");
    }
  }

  nb::object target_;
  std::string name_;
};

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

}  // namespace

void bind_samplers(nb::module_ m) {
  nb::class_<Sampler>(m, "Sampler", "A C++ sampler, shared by the clients it is given to.")
      .def_prop_ro("name", &Sampler::name)
      .def(
          "state", [](const Sampler& s) { return from_value(s.state()); },
          "The state kept in checkpoints (reservations of DP ranks), as JSON-like values.")
      .def(
          "restore", [](Sampler& s, nb::handle state) { s.restore(to_value(state, "sampler state")); }, "state"_a)
      .def(
          "clear",
          [](Sampler& s, const std::string& partition_id, std::optional<std::string> task_name) {
            s.clear(partition_id, task_name ? &*task_name : nullptr);
          },
          "partition_id"_a, "task_name"_a = nb::none(), "Forgets the state of a partition, or of one task in it.")
      .def("__repr__", [](const Sampler& s) { return "<seqflow sampler " + s.name() + ">"; });

  nb::class_<SampleInfoHandle>(m, "SampleInfo", "Per-sample facts a sampler may read, valid during its sample() call.")
      .def(
          "length", [](const SampleInfoHandle& h, int64_t gi) { return h.get().length(gi); }, "global_index"_a,
          "custom_meta['total_lengths'] of the sample, or None")
      .def(
          "group_key", [](const SampleInfoHandle& h, int64_t gi, int64_t n) { return h.get().group_key(gi, n); },
          "global_index"_a, "n"_a, "the sample's prompt group for groups of n")
      .def(
          "custom_meta", [](const SampleInfoHandle& h, int64_t gi) { return from_value(h.get().custom_meta(gi)); },
          "global_index"_a)
      .def_ro("partition_id", &SampleInfoHandle::partition_id)
      .def(
          "get_custom_meta",
          [](const SampleInfoHandle& h, const std::vector<int64_t>& global_indexes) {
            nb::dict found;
            for (int64_t gi : global_indexes) {
              const Value& meta = h.get().custom_meta(gi);
              if (!meta.empty()) found[nb::int_(gi)] = from_value(meta);
            }
            return found;
          },
          "global_indexes"_a,
          "TransferQueue's DataPartitionStatus.get_custom_meta: {global_index: custom_meta} of the samples "
          "that have any.");

  m.def("sequential_sampler", &make_sequential_sampler);
  m.def("grpo_group_n_sampler", &make_grpo_group_n_sampler, "n_samples_per_prompt"_a);
  m.def("rank_aware_sampler", &make_rank_aware_sampler);
  m.def(
      "seqlen_balanced_sampler",
      [](int64_t n, int64_t dp_size, const std::string& algorithm, int64_t default_length, nb::handle workload) {
        return make_seqlen_balanced_sampler(n, dp_size, algorithm, default_length, workload_argument(workload));
      },
      "n_samples_per_prompt"_a, "dp_size"_a, "algorithm"_a, "default_length"_a, "workload"_a.none());
  m.def(
      "token_budget_sampler",
      [](int64_t max_tokens, int64_t n, int64_t dp_size, int64_t default_length, nb::handle workload) {
        return make_token_budget_sampler(max_tokens, n, dp_size, default_length, workload_argument(workload));
      },
      "max_tokens"_a, "n_samples_per_prompt"_a, "dp_size"_a, "default_length"_a, "workload"_a.none());
  m.def(
      "sampler_by_name",
      [](const std::string& name, nb::handle args) { return make_sampler(name, to_value(args, "sampler arguments")); },
      "name"_a, "args"_a);
  m.def(
      "python_sampler",
      [](nb::object target) -> std::shared_ptr<Sampler> { return std::make_shared<PythonSampler>(std::move(target)); },
      "target"_a, "A C++ sampler that calls target.sample(ready_indexes, batch_size, **kwargs).");

  m.def(
      "run_sampler",
      [](Sampler& sampler, const Int64Input& ready_indexes, bool sort_ready, int64_t batch_size,
         const std::string& partition_id, const std::string& task_name, std::optional<int64_t> dp_rank,
         int64_t batch_index, nb::handle partition, std::optional<nb::dict> custom_meta) {
        std::vector<int64_t> ready(ready_indexes.data(), ready_indexes.data() + ready_indexes.shape(0));
        if (sort_ready) std::sort(ready.begin(), ready.end());
        // The partition's custom_meta wins over the caller's dict, as TransferQueue reads it.
        std::unordered_map<int64_t, Value> meta;
        auto add_meta = [&](nb::handle entries) {
          for (auto [key, value] : nb::cast<nb::dict>(entries)) {
            meta.insert_or_assign(nb::cast<int64_t>(key),
                                  to_value(value, "custom_meta[" + std::string(nb::str(key).c_str()) + "]"));
          }
        };
        if (custom_meta) add_meta(*custom_meta);
        if (!partition.is_none()) add_meta(partition.attr("get_custom_meta")(nb::cast(ready)));
        MapSampleInfo info(std::move(meta), ready, custom_meta || !partition.is_none());
        SampleRequest request;
        request.ready = ready;
        request.batch_size = batch_size;
        request.partition_id = partition_id;
        request.task_name = task_name;
        request.sampling = {dp_rank.value_or(0), batch_index, dp_rank.has_value()};
        request.info = &info;
        return sampler.sample(request).sampled;
      },
      "sampler"_a, "ready_indexes"_a, "sort_ready"_a, "batch_size"_a, "partition_id"_a, "task_name"_a,
      "dp_rank"_a.none(), "batch_index"_a, "partition"_a.none(), "custom_meta"_a.none(),
      "Runs a sampler outside any controller (for tests and tools): the sampled indexes. Per-sample metadata\n"
      "comes from custom_meta (global index -> dict) and partition.get_custom_meta(ready); with neither,\n"
      "balancing samplers split in order, as TransferQueue's do.");
}

}  // namespace seqflow::bindings
