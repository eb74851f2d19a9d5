// Samplers in Python. The controller calls a sampler under its own lock, with
// the GIL released (every binding releases it before calling in), so the
// adapter below can take the GIL to call Python without a deadlock.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings/cached_attribute.h"
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
  static CachedAttribute value_error("builtins", "ValueError");
  static CachedAttribute key_error("builtins", "KeyError");
  static CachedAttribute timeout_error("builtins", "TimeoutError");
  if (error.matches(value_error)) return ErrorCode::kInvalidArgument;
  if (error.matches(key_error)) return ErrorCode::kNotFound;
  if (error.matches(timeout_error)) return ErrorCode::kTimeout;
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
    if (python_gone()) {
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

}  // namespace

std::shared_ptr<Sampler> python_sampler(nb::object target) {
  return std::make_shared<PythonSampler>(std::move(target));
}

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

  m.def(
      "sampler_by_name",
      [](const std::string& name, const nb::dict& args) {
        return make_sampler(name, to_value(args, "sampler arguments"));
      },
      "name"_a, "args"_a);
  m.def("python_sampler", &python_sampler, "target"_a,
        "A C++ sampler that calls target.sample(ready_indexes, batch_size, **kwargs).");
  bind_builtin_samplers(m);
}

}  // namespace seqflow::bindings
