// seqflow's built-in samplers as Python classes (seqflow.samplers): handles
// to the C++ samplers the controller runs under its lock, without Python.
// Called directly (sampler.sample(ready, batch_size, **kwargs)) they answer
// as TransferQueue 0.1.11's do, with its signatures. seqflow.samplers
// registers BuiltinSampler with its BaseSampler ABC, so the built-ins (and
// Python subclasses of them) are BaseSampler instances.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bindings/arguments.h"
#include "bindings/arrays.h"
#include "bindings/checks.h"
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

// What a built-in sample() takes besides ready_indexes and batch_size, each
// positional at its place in TransferQueue's signature (-1: keyword only).
struct Signature {
  int task_name = -1, partition_id = -1, dp_rank = -1, batch_index = -1;
  bool dp_rank_defaults_to_zero = false;
};

nb::object argument(const nb::args& args, const nb::kwargs& kwargs, int position, const char* name,
                    nb::handle fallback) {
  if (position >= 0 && static_cast<size_t>(position) < args.size()) return args[static_cast<size_t>(position)];
  return kwargs.contains(name) ? nb::object(kwargs[name]) : nb::borrow(fallback);
}

struct BuiltinSampler {
  std::shared_ptr<Sampler> native;
  Signature signature;
  bool sorts_ready = false;  // sort a direct call's ready indexes, as TransferQueue's group samplers do
  bool caches_pairs = true;  // TransferQueue's `_states` entries: (sampled, consumed), or only sampled

  // One direct call of the C++ sampler (not while a client uses it).
  // dp_rank None: the caller named no rank (GRPOGroupNSampler then keeps no answer for it).
  nb::tuple run(const nb::args& args, const nb::kwargs& kwargs) const {
    // After the two leading positionals (ready_indexes, batch_size).
    const auto at = [&](int position, const char* name, nb::handle fallback) {
      return argument(args, kwargs, position < 0 ? -1 : position + 2, name, fallback);
    };
    const Signature& s = signature;
    const nb::object ready_arg = argument(args, kwargs, 0, "ready_indexes", nb::handle());
    const nb::object batch_arg = argument(args, kwargs, 1, "batch_size", nb::handle());
    if (!ready_arg.is_valid() || !batch_arg.is_valid()) {
      throw nb::type_error("sample() needs ready_indexes and batch_size");
    }
    const nb::object dp_arg =
        at(s.dp_rank, "dp_rank", s.dp_rank_defaults_to_zero ? nb::object(nb::int_(0)) : nb::none());
    const nb::object batch_index_arg = at(s.batch_index, "batch_index", nb::int_(0));
    const nb::object partition = at(-1, "partition", nb::none());
    const nb::object custom_meta = at(-1, "custom_meta", nb::none());
    const Int64Input ready_input = int64_input(ready_arg, "ready_indexes", false);
    std::vector<int64_t> ready(ready_input.data(), ready_input.data() + ready_input.shape(0));
    if (sorts_ready) std::sort(ready.begin(), ready.end());
    SampleRequest request;
    request.batch_size = check_count(batch_arg, "batch_size", std::numeric_limits<int64_t>::min());
    static const nb::handle str_type(reinterpret_cast<PyObject*>(&PyUnicode_Type));
    request.partition_id = nb::cast<std::string>(
        check_instance(at(s.partition_id, "partition_id", nb::str("")), "partition_id", str_type, "a str"));
    request.task_name = nb::cast<std::string>(
        check_instance(at(s.task_name, "task_name", nb::str("")), "task_name", str_type, "a str"));
    const std::optional<int64_t> dp_rank =
        dp_arg.is_none() ? std::nullopt
                         : std::optional(check_count(dp_arg, "dp_rank", std::numeric_limits<int64_t>::min()));
    const int64_t batch_index = batch_index_arg.is_none()
                                    ? 0
                                    : check_count(batch_index_arg, "batch_index", std::numeric_limits<int64_t>::min());
    // The partition's custom_meta wins over the caller's dict, as TransferQueue reads it.
    std::unordered_map<int64_t, Value> meta;
    auto add_meta = [&](nb::handle entries) {
      for (auto [key, value] : nb::cast<nb::dict>(entries)) {
        meta.insert_or_assign(nb::cast<int64_t>(key),
                              to_value(value, "custom_meta[" + std::string(nb::str(key).c_str()) + "]"));
      }
    };
    if (!custom_meta.is_none()) add_meta(custom_meta);
    if (!partition.is_none()) add_meta(partition.attr("get_custom_meta")(nb::cast(ready)));
    MapSampleInfo info(std::move(meta), ready, !custom_meta.is_none() || !partition.is_none());
    request.ready = ready;
    request.sampling = {dp_rank.value_or(0), batch_index, dp_rank.has_value()};
    request.info = &info;
    const std::vector<int64_t> sampled = native->sample(request).sampled;
    return nb::make_tuple(nb::cast(sampled), nb::cast(sampled));
  }
};

struct Sequential : BuiltinSampler {};
struct RankAware : BuiltinSampler {};

struct GRPOGroupN : BuiltinSampler {
  int64_t n_samples_per_prompt = 1;
};

struct SeqlenBalanced : GRPOGroupN {
  int64_t dp_size = 1;
  nb::object algorithm, default_length, workload;
};

struct TokenBudget : BuiltinSampler {
  int64_t max_tokens = 0, n_samples_per_prompt = 1, dp_size = 1;
  nb::object default_length, workload;
};

// TransferQueue's words for the range of a count.
int64_t positive(nb::handle value, const char* name) {
  const int64_t number = check_count(value, name, std::numeric_limits<int64_t>::min());
  if (number < 1) throw nb::value_error((std::string(name) + " must be positive, got " + repr_text(value)).c_str());
  return number;
}

// default_length for the engine: -1 when None (a sample without total_lengths is an error).
int64_t optional_length(nb::handle value) { return value.is_none() ? -1 : check_count(value, "default_length"); }

// The sample() functions of the built-in classes, to tell them from a
// Python subclass's own.
std::vector<nb::handle>& builtin_sample_functions() {
  static std::vector<nb::handle> functions;
  return functions;
}

// The C++ sampler the controller calls: the built-in itself, or (a Python
// subclass that overrides sample()) one that calls the Python object.
std::shared_ptr<Sampler> native_handle(nb::handle self) {
  const nb::object sample = nb::getattr(self.type(), "sample");
  const auto& builtins = builtin_sample_functions();
  if (std::find_if(builtins.begin(), builtins.end(), [&](nb::handle f) { return f.is(sample); }) != builtins.end()) {
    return nb::cast<const BuiltinSampler&>(self).native;
  }
  return python_sampler(nb::borrow(self));
}

nb::dict states_of(const BuiltinSampler& s) {
  return reservation_states(from_value(s.native->state()), s.caches_pairs);
}

constexpr const char* kSampleDoc =
    "(sampled, consumed): consumed is sampled, as TransferQueue 0.1.11's samplers answer.";

// Binds `sample` (a function of (self, args, kwargs)) and remembers it as a built-in's.
template <typename Class, typename Sample>
void add_sample(Class& cls, const char* signature, Sample&& sample) {
  cls.def("sample", std::forward<Sample>(sample), nb::sig(signature), kSampleDoc);
  builtin_sample_functions().push_back(nb::object(cls.attr("sample")).release());
}

// The C++ sampler's answer, for the samplers without rules of their own in Python.
constexpr auto run_sample = [](const BuiltinSampler& s, nb::args args, nb::kwargs kwargs) {
  return s.run(args, kwargs);
};

void bind_base(nb::module_ m) {
  nb::class_<BuiltinSampler>(m, "BuiltinSampler",
                             "A built-in sampler: a handle to the C++ implementation. Its `_states` is a\n"
                             "read-only view of the C++ reservations in TransferQueue's layout.")
      .def_prop_ro("name", [](const BuiltinSampler& s) { return s.native->name(); })
      .def_prop_ro("_states", &states_of)
      .def("_native_handle", &native_handle, "The C++ sampler the controller calls.")
      .def(
          "__call__",
          [](nb::handle self, nb::args args, nb::kwargs kwargs) { return self.attr("sample")(*args, **kwargs); },
          nb::sig("def __call__(self, *args, **kwargs) -> tuple[list[int], list[int]]"))
      .def(
          "has_cached_result",
          [](nb::handle self, nb::handle partition_id, nb::handle task_name, nb::handle sampling_config) {
            return !cached(self.attr("_states"), partition_id, task_name,
                           sampling_config.is_none() ? nb::dict() : nb::borrow(sampling_config))
                        .is_none();
          },
          "partition_id"_a.none(), "task_name"_a.none(), "sampling_config"_a.none() = nb::none(),
          "TransferQueue's check: `_states` holds an answer for this caller's\n(dp_rank, batch_index).")
      .def(
          "reserved",
          [](nb::handle self, nb::handle partition_id, nb::handle task_name, nb::handle sampling_config) {
            return cached(self.attr("_states"), partition_id, task_name, sampling_config);
          },
          "partition_id"_a.none(), "task_name"_a.none(), "sampling_config"_a,
          "An answer already kept for this caller, served even when too little\n"
          "is ready (and not consumed again): the answer cached in `_states`.")
      .def(
          "clear",
          [](BuiltinSampler& s, const std::string& partition_id, std::optional<std::string> task_name) {
            s.native->clear(partition_id, task_name ? &*task_name : nullptr);
          },
          "partition_id"_a, "task_name"_a = nb::none(), "Forgets the state of a partition (or of one task in it).")
      .def(
          "clear_cache", [](nb::handle self, nb::handle partition_id) { self.attr("clear")(partition_id); },
          "partition_id"_a, "TransferQueue's name for clear(partition_id).")
      .def(
          "state", [](const BuiltinSampler& s) { return from_value(s.native->state()); },
          "The state kept in checkpoints (reservations of DP ranks), as JSON-like values.")
      .def(
          "restore", [](BuiltinSampler& s, nb::handle state) { s.native->restore(to_value(state, "sampler state")); },
          "state"_a)
      .def(
          "save_checkpoint",
          [](const BuiltinSampler& s) {
            nb::dict out;
            out["state"] = from_value(s.native->state());
            return out;
          },
          "TransferQueue's checkpoint hook: {'state': state()}.")
      .def(
          "load_checkpoint",
          [](BuiltinSampler& s, nb::handle state) { s.native->restore(to_value(state["state"], "sampler state")); },
          "state"_a)
      .def("__repr__", [](nb::handle self) { return type_name_of(self) + "()"; });
}

// TransferQueue's slice of a direct call (fewer when fewer are ready; a
// negative batch_size counts from the end), each index as int() reads it.
nb::tuple sequential_sample(const nb::args& args, const nb::kwargs& kwargs) {
  const nb::object ready = argument(args, kwargs, 0, "ready_indexes", nb::handle());
  const nb::object batch_size = argument(args, kwargs, 1, "batch_size", nb::handle());
  if (!ready.is_valid() || !batch_size.is_valid()) throw nb::type_error("sample() needs ready_indexes and batch_size");
  const nb::object items = nb::steal(PySequence_List(ready.ptr()));
  if (!items.is_valid()) throw nb::python_error();
  const nb::object slice = nb::steal(PySlice_New(Py_None, batch_size.ptr(), Py_None));
  if (!slice.is_valid()) throw nb::python_error();
  nb::list sampled;
  for (nb::handle index : nb::object(items[slice])) sampled.append(nb::int_(index));
  return nb::make_tuple(sampled, nb::list(sampled));
}

template <typename T>
T& base_fields(T* self, std::shared_ptr<Sampler> native, Signature signature, bool sorts_ready, bool caches_pairs) {
  self->native = std::move(native);
  self->signature = signature;
  self->sorts_ready = sorts_ready;
  self->caches_pairs = caches_pairs;
  return *self;
}

// GRPOGroupNSampler's and SeqlenBalancedSampler's, as TransferQueue's.
constexpr const char* kGroupSampleSignature =
    "def sample(self, ready_indexes, batch_size: int, task_name: str = '', partition_id: str = '', *args, "
    "dp_rank: int | None = None, batch_index: int | None = None, partition=None, custom_meta: dict | None = None, "
    "**kwargs) -> tuple[list[int], list[int]]";
// The arguments both balancing samplers keep, as given (default_length and workload unconverted).
template <typename T>
T& balancing_fields(T& s, int64_t count, int64_t ranks, nb::handle default_length, nb::handle workload) {
  s.n_samples_per_prompt = count;
  s.dp_size = ranks;
  s.default_length = nb::borrow(default_length);
  s.workload = nb::borrow(workload);
  return s;
}

const Signature kGroupSignature{0, 1, -1, -1,
                                false};  // (ready, batch_size, task_name, partition_id, *, dp_rank, batch_index)

void bind_classes(nb::module_ m) {
  auto sequential =
      nb::class_<Sequential, BuiltinSampler>(m, "SequentialSampler",
                                             "The first batch_size ready samples, oldest first. Through a client it\n"
                                             "waits for a whole batch; called directly it slices as TransferQueue's\n"
                                             "does (fewer when fewer are ready).");
  sequential.def("__init__", [](Sequential* self) {
    base_fields(new (self) Sequential(), make_sequential_sampler(), {}, false, false);
  });
  add_sample(sequential,
             "def sample(self, ready_indexes, batch_size: int, *args, **kwargs) -> tuple[list[int], list[int]]",
             [](const BuiltinSampler&, nb::args args, nb::kwargs kwargs) { return sequential_sample(args, kwargs); });

  auto grpo =
      nb::class_<GRPOGroupN, BuiltinSampler>(m, "GRPOGroupNSampler",
                                             "Whole prompt groups of n_samples_per_prompt only. Through a client,\n"
                                             "groups are custom_meta[\"group_id\"] or runs of n within one put, never\n"
                                             "index contiguity; called directly, runs of n consecutive global indexes\n"
                                             "(TransferQueue's rule) unless custom_meta gives group_id.");
  grpo.def(
          "__init__",
          [](GRPOGroupN* self, nb::handle n) {
            const int64_t count = positive(n, "n_samples_per_prompt");
            base_fields(new (self) GRPOGroupN(), make_grpo_group_n_sampler(count), kGroupSignature, true, true)
                .n_samples_per_prompt = count;
          },
          "n_samples_per_prompt"_a.none() = 1)
      .def_ro("n_samples_per_prompt", &GRPOGroupN::n_samples_per_prompt);
  add_sample(grpo, kGroupSampleSignature, run_sample);

  auto rank_aware = nb::class_<RankAware, BuiltinSampler>(
      m, "RankAwareSampler",
      "Callers with the same (dp_rank, batch_index) get the same samples;\ndifferent dp_ranks get disjoint samples.");
  rank_aware.def("__init__", [](RankAware* self) {
    base_fields(new (self) RankAware(), make_rank_aware_sampler(), {2, 3, 0, 1, true}, false, false);
  });
  add_sample(rank_aware,
             "def sample(self, ready_indexes, batch_size: int, dp_rank: int = 0, batch_index: int = 0, task_name: str "
             "= '', partition_id: str = '', *args, partition=None, custom_meta: dict | None = None, **kwargs) -> "
             "tuple[list[int], list[int]]",
             run_sample);

  auto seqlen = nb::class_<SeqlenBalanced, GRPOGroupN>(
      m, "SeqlenBalancedSampler",
      "Per DP rank batch_size; the first call for a batch_index reserves the\n"
      "whole global batch (whole groups), balances custom_meta[\"total_lengths\"]\n"
      "over dp_size ranks and answers every rank from that reservation.\n"
      "algorithm \"kk\" splits exactly as TransferQueue does; \"auto\" (default)\n"
      "balances better. default_length stands in for a missing total_lengths\n"
      "(None: a missing one is an error). workload: what the split evens out, as\n"
      "seqflow.balance.partition takes it (default tokens; an OnlineWorkload\n"
      "counts as its model at construction).");
  seqlen
      .def(
          "__init__",
          [](SeqlenBalanced* self, nb::handle n, nb::handle dp_size, nb::handle algorithm, nb::handle default_length,
             nb::handle workload) {
            const int64_t count = positive(n, "n_samples_per_prompt");
            const int64_t ranks = positive(dp_size, "dp_size");
            const int64_t length = optional_length(default_length);
            static const nb::handle str_type(reinterpret_cast<PyObject*>(&PyUnicode_Type));
            const std::string split = nb::cast<std::string>(check_instance(algorithm, "algorithm", str_type, "a str"));
            auto native = make_seqlen_balanced_sampler(count, ranks, split, length, workload_argument(workload));
            SeqlenBalanced& s = balancing_fields(
                base_fields(new (self) SeqlenBalanced(), std::move(native), kGroupSignature, true, true), count, ranks,
                default_length, workload);
            s.algorithm = nb::borrow(algorithm);
          },
          "n_samples_per_prompt"_a.none() = 1, "dp_size"_a.none() = 1, "algorithm"_a.none() = "auto",
          "default_length"_a.none() = nb::none(), "workload"_a.none() = "tokens")
      .def_ro("dp_size", &SeqlenBalanced::dp_size)
      .def_ro("algorithm", &SeqlenBalanced::algorithm)
      .def_ro("default_length", &SeqlenBalanced::default_length)
      .def_ro("workload", &SeqlenBalanced::workload)
      .def_prop_ro(
          "_balanced_cache", [](const SeqlenBalanced& s) { return reservation_cache(from_value(s.native->state())); },
          "TransferQueue's view of the reservations: {(partition_id,\n"
          "task_name, batch_index): [samples of rank 0, rank 1, ...]}.");
  add_sample(seqlen, kGroupSampleSignature, [](const SeqlenBalanced& s, nb::args args, nb::kwargs kwargs) {
    const nb::object dp_rank = argument(args, kwargs, -1, "dp_rank", nb::none());
    const std::optional<nb::int_> rank = python_integer(dp_rank);
    if (rank && PyObject_RichCompareBool(rank->ptr(), nb::int_(s.dp_size).ptr(), Py_GE) == 1) {
      return nb::make_tuple(nb::list(), nb::list());  // TransferQueue's answer for a rank past dp_size
    }
    return s.run(args, kwargs);
  });

  auto budget =
      nb::class_<TokenBudget, BuiltinSampler>(m, "TokenBudgetSampler",
                                              "Fills each rank's batch up to max_tokens (sum of total_lengths), whole\n"
                                              "groups, balanced over dp_size ranks by `workload` (as\n"
                                              "seqflow.balance.partition takes it; default tokens).");
  budget
      .def(
          "__init__",
          [](TokenBudget* self, nb::handle max_tokens, nb::handle n, nb::handle dp_size, nb::handle default_length,
             nb::handle workload) {
            const int64_t tokens = positive(max_tokens, "max_tokens");
            const int64_t count = positive(n, "n_samples_per_prompt");
            const int64_t ranks = positive(dp_size, "dp_size");
            const int64_t length = optional_length(default_length);
            auto native = make_token_budget_sampler(tokens, count, ranks, length, workload_argument(workload));
            balancing_fields(
                base_fields(new (self) TokenBudget(), std::move(native), {-1, -1, -1, -1, true}, true, true), count,
                ranks, default_length, workload)
                .max_tokens = tokens;
          },
          "max_tokens"_a.none(), "n_samples_per_prompt"_a.none() = 1, "dp_size"_a.none() = 1,
          "default_length"_a.none() = nb::none(), "workload"_a.none() = "tokens")
      .def_ro("max_tokens", &TokenBudget::max_tokens)
      .def_ro("n_samples_per_prompt", &TokenBudget::n_samples_per_prompt)
      .def_ro("dp_size", &TokenBudget::dp_size)
      .def_ro("default_length", &TokenBudget::default_length)
      .def_ro("workload", &TokenBudget::workload);
  add_sample(budget,
             "def sample(self, ready_indexes, batch_size: int, *args, partition_id: str = '', task_name: str = '', "
             "dp_rank: int = 0, batch_index: int = 0, partition=None, custom_meta: dict | None = None, **kwargs) -> "
             "tuple[list[int], list[int]]",
             run_sample);

  for (const char* name : {"BuiltinSampler", "SequentialSampler", "GRPOGroupNSampler", "RankAwareSampler",
                           "SeqlenBalancedSampler", "TokenBudgetSampler"}) {
    m.attr(name).attr("__module__") = "seqflow.samplers";
  }
}

}  // namespace

void bind_builtin_samplers(nb::module_ m) {
  bind_base(m);
  bind_classes(m);
}

}  // namespace seqflow::bindings
