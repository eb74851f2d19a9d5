// seqflow.balance: Workload, Partition (the C++ object) and the partitioning functions.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>

#include "bindings/arguments.h"
#include "bindings/arrays.h"
#include "bindings/gil.h"
#include "bindings/submodules.h"
#include "durable/atomic_file.h"
#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

const char* kind_name(Workload::Kind kind) {
  switch (kind) {
    case Workload::Kind::kTokens:
      return "tokens";
    case Workload::Kind::kVerl:
      return "verl";
    case Workload::Kind::kQuadratic:
      return "quadratic";
    case Workload::Kind::kOnline:
      return "online";
    case Workload::Kind::kCalibrated:
      break;
  }
  return "calibrated";
}

const SecondsCoefficients& calibrated_coefficients(const Workload& w) {
  if (w.kind() != Workload::Kind::kCalibrated) {
    throw_invalid("workload: " + w.name() + " has no coefficients in seconds; only a calibrated workload has");
  }
  return w.coefficients();
}

std::string partition_repr(const balance::Partition& p) {
  size_t items = 0;
  size_t smallest = p.parts.empty() ? 0 : p.parts[0].size();
  size_t largest = 0;
  for (const auto& part : p.parts) {
    items += part.size();
    smallest = std::min(smallest, part.size());
    largest = std::max(largest, part.size());
  }
  char numbers[128];
  std::snprintf(numbers, sizeof numbers, "gap=%.3g, spread=%.3g", p.gap, p.spread);
  return "Partition(k=" + std::to_string(p.parts.size()) + ", items=" + std::to_string(items) +
         ", heaviest=" + std::to_string(p.heaviest()) + ", lower_bound=" + std::to_string(p.lower_bound) + ", " +
         numbers + ", part sizes " + std::to_string(smallest) + ".." + std::to_string(largest) + ")";
}

void save_workload(const Workload& w, const PathParameter<"path">& path) {
  const std::string text = w.to_json() + "\n";
  GilReleased release;
  durable::AtomicFileWriter file(path.value);
  file.write(std::as_bytes(std::span(text)));
  file.commit();
}

Workload load_workload(const PathParameter<"path">& path) {
  std::shared_ptr<const Buffer> bytes;
  try {
    GilReleased release;
    bytes = durable::read_file(path.value);
  } catch (const Error& error) {
    if (error.code() != ErrorCode::kNotFound) throw;
    throw MissingFile("No such file or directory", path.value);
  }
  return Workload::from_json(std::string(reinterpret_cast<const char*>(bytes->data), bytes->size));
}

using PartitionState = std::tuple<std::vector<std::vector<int64_t>>, std::vector<int64_t>, std::vector<int64_t>,
                                  int64_t, double, double, double>;

void bind_partition(nb::module_ m) {
  auto cls = nb::class_<balance::Partition>(
      m, "Partition",
      "A split of items into k parts. parts: item indexes per part, each ascending. sums: workload per part.\n"
      "assignment: part of each item. lower_bound: no split makes the heaviest part lighter. spread: (max - min)\n"
      "/ mean of the part workloads. max_over_mean: heaviest / mean. gap: heaviest / lower_bound - 1.");
  cls.def_prop_ro("parts",
                  [](const balance::Partition& p) {
                    nb::list parts;
                    for (const auto& part : p.parts) parts.append(view_of(part, p));
                    return parts;
                  })
      .def_prop_ro(
          "sums", [](const balance::Partition& p) { return view_of(p.sums, p); }, kArray)
      .def_prop_ro(
          "assignment", [](const balance::Partition& p) { return view_of(p.assignment, p); }, kArray)
      .def_ro("lower_bound", &balance::Partition::lower_bound)
      .def_ro("spread", &balance::Partition::spread)
      .def_ro("max_over_mean", &balance::Partition::max_over_mean)
      .def_ro("gap", &balance::Partition::gap)
      .def_prop_ro("k", [](const balance::Partition& p) { return p.parts.size(); })
      .def_prop_ro("heaviest", &balance::Partition::heaviest)
      .def("__repr__", &partition_repr)
      .def("__getstate__",
           [](const balance::Partition& p) {
             return PartitionState{p.parts, p.sums, p.assignment, p.lower_bound, p.spread, p.max_over_mean, p.gap};
           })
      .def("__setstate__", [](balance::Partition& p, const PartitionState& state) {
        const auto& [parts, sums, assignment, lower_bound, spread, max_over_mean, gap] = state;
        new (&p) balance::Partition{parts, sums, assignment, lower_bound, spread, max_over_mean, gap};
      });
  cls.attr("__module__") = "seqflow.balance";
}

}  // namespace

void bind_balance(nb::module_ m) {
  nb::class_<Workload>(m, "Workload", "Cost model of one sequence of length L.")
      .def_static("tokens", &Workload::tokens, "cost = L")
      .def_static("verl", &Workload::verl, "cost = 24576 * L + L * L (verl's model)")
      .def_static(
          "quadratic", [](IntegerParameter<"a"> a, IntegerParameter<"b"> b) { return Workload::quadratic(a, b); },
          "a"_a, "b"_a, "cost = a * L + b * L * L")
      .def_static(
          "parse", [](const TextParameter<"spec">& spec) { return Workload::parse(spec.value); }, "spec"_a,
          "'tokens', 'verl' or 'quadratic(a,b)'")
      .def_static(
          "calibrated",
          [](double per_token, double per_token_squared, double per_sequence, double per_micro_batch,
             double per_unaligned_token_squared, IntegerParameter<"alignment"> alignment) {
            return Workload::calibrated(
                {per_token, per_token_squared, per_sequence, per_micro_batch, per_unaligned_token_squared, alignment});
          },
          "per_token"_a = 0.0, "per_token_squared"_a = 0.0, "per_sequence"_a = 0.0, "per_micro_batch"_a = 0.0,
          "per_unaligned_token_squared"_a = 0.0, "alignment"_a = 1,
          "A calibrated model with these coefficients in seconds (seqflow.balance.calibrate fits one).\n"
          "per_unaligned_token_squared: extra seconds per L^2 of a sequence whose length is\n"
          "not a multiple of `alignment` (1: no such term).")
      .def_static(
          "from_json", [](const TextParameter<"text">& text) { return Workload::from_json(text.value); }, "text"_a,
          "The model to_json() wrote (any kind).")
      .def("to_json", &Workload::to_json)
      .def(
          "cost", [](const Workload& w, IntegerParameter<"length"> length) { return w.cost(length); }, "length"_a)
      .def(
          "seconds",
          [](const Workload& w, const IntegersParameter<"lengths">& lengths) { return w.seconds(lengths.value); },
          "lengths"_a, "Predicted seconds of one micro-batch of these sequence lengths\n(calibrated workloads only).")
      .def("save", &save_workload, "path"_a, "Write to_json() to `path` (replaced atomically).")
      .def_static("load", &load_workload, "path"_a, "The Workload save() wrote to `path`.")
      .def_prop_ro("kind", [](const Workload& w) { return kind_name(w.kind()); })
      .def_prop_ro("per_token", [](const Workload& w) { return calibrated_coefficients(w).per_token; })
      .def_prop_ro("per_token_squared", [](const Workload& w) { return calibrated_coefficients(w).per_token_squared; })
      .def_prop_ro("per_sequence", [](const Workload& w) { return calibrated_coefficients(w).per_sequence; })
      .def_prop_ro("per_micro_batch", [](const Workload& w) { return calibrated_coefficients(w).per_micro_batch; })
      .def_prop_ro("per_unaligned_token_squared",
                   [](const Workload& w) { return calibrated_coefficients(w).per_unaligned_token_squared; })
      .def_prop_ro("alignment", [](const Workload& w) { return calibrated_coefficients(w).alignment; })
      .def_prop_ro(
          "fit", [](const Workload& w) { return w.fit(); }, "The FitReport (records 0 unless calibrated by a fit).")
      .def_prop_ro("name", &Workload::name)
      .def("__repr__", [](const Workload& w) { return "Workload(" + w.name() + ")"; })
      .def("__eq__", [](const Workload& a, const Workload& b) { return a == b; })
      .def("__getstate__", &Workload::to_json)
      .def("__setstate__",
           [](Workload& w, const std::string& state) { new (&w) Workload(Workload::from_json(state)); });

  bind_calibration(m);
  bind_partition(m);
  // Typed calls under seqflow.balance's Python functions, which convert the user's arguments.
  m.def(
      "partition",
      [](const Int64Input& weights, int64_t k, const std::string& cardinality, const Workload& workload,
         const std::optional<Int64Input>& groups, const std::string& algorithm) {
        balance::Options options;
        options.cardinality = balance::parse_cardinality(cardinality);
        options.algorithm = balance::parse_algorithm(algorithm);
        options.workload = workload;
        if (groups) options.groups = as_span(*groups);
        GilReleased release;
        return balance::partition(as_span(weights), k, options);
      },
      "weights"_a, "k"_a, "cardinality"_a, "workload"_a, "groups"_a.none(), "algorithm"_a,
      "seqflow.balance.partition with its arguments converted.");

  // verl's two functions take negative lengths as verl does (they sort them),
  // as an int64 array or (the lists users pass, without numpy) an IntList.
  // The list overload comes first: nanobind tries overloads in order, and
  // the array's caster given a list tries numpy's conversion of it first
  // (more than the balancing of a few thousand lengths costs).
  const auto verl_function = [&m](const char* name, auto function, const char* doc) {
    m.def(
        name,
        [function](const IntList& seqlens, int64_t k_partitions, bool equal_size) {
          GilReleased release;
          return function(seqlens.values, k_partitions, equal_size);
        },
        "seqlen_list"_a, "k_partitions"_a, "equal_size"_a, doc);
    m.def(
        name,
        [function](const Int64Input& seqlens, int64_t k_partitions, bool equal_size) {
          GilReleased release;
          return function(as_span(seqlens), k_partitions, equal_size);
        },
        "seqlen_list"_a, "k_partitions"_a, "equal_size"_a, doc);
  };
  verl_function("karmarkar_karp", &balance::karmarkar_karp,
                "verl's karmarkar_karp: k lists of item indexes, in verl's exact order.");
  verl_function("get_seqlen_balanced_partitions", &balance::get_seqlen_balanced_partitions,
                "verl's get_seqlen_balanced_partitions: as karmarkar_karp, each part sorted.");
  verl_function("greedy_partition", &balance::greedy_partition,
                "verl's greedy_partition: each item in turn onto the lightest part (the lowest on ties).");
  m.def(
      "get_group_balanced_partitions",
      [](const Int64Input& seqlens, const Int64Input& uids, int64_t k_partitions) {
        GilReleased release;
        return balance::get_group_balanced_partitions(as_span(seqlens), as_span(uids), k_partitions);
      },
      "seqlen_list"_a, "uid_list"_a, "k_partitions"_a,
      "verl's get_group_balanced_partitions over integer uids: each uid whole, as many uids per part.");
}

}  // namespace seqflow::bindings
