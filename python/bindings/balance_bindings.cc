#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "bindings/arrays.h"
#include "bindings/gil.h"
#include "bindings/submodules.h"
#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

// An integer argument of a Workload method: a Python or numpy integer (not a
// bool, not a float), within int64; errors name the parameter and the value.
int64_t int64_argument(nb::handle value, const char* name) {
  const std::string where = std::string(name) + " = " + nb::repr(value).c_str();
  nb::object integer = nb::steal(PyNumber_Index(value.ptr()));
  if (!integer.is_valid() || PyBool_Check(value.ptr())) {
    PyErr_Clear();
    throw_invalid(where + " is not an integer");
  }
  int overflow = 0;
  const long long out = PyLong_AsLongLongAndOverflow(integer.ptr(), &overflow);
  if (overflow != 0) throw_invalid(where + " is beyond the int64 range");
  return out;
}

nb::dict partition_to_dict(balance::Partition&& result) {
  nb::dict out;
  nb::list parts;
  for (auto& part : result.parts) parts.append(to_numpy(std::move(part)));
  out["parts"] = parts;
  out["sums"] = to_numpy(std::move(result.sums));
  out["assignment"] = to_numpy(std::move(result.assignment));
  out["lower_bound"] = result.lower_bound;
  out["spread"] = result.spread;
  out["max_over_mean"] = result.max_over_mean;
  out["gap"] = result.gap;
  return out;
}

}  // namespace

void bind_balance(nb::module_ m) {
  nb::class_<Workload>(m, "Workload", "Cost model of one sequence of length L.")
      .def_static("tokens", &Workload::tokens, "cost = L")
      .def_static("verl", &Workload::verl, "cost = 24576 * L + L * L (verl's model)")
      .def_static(
          "quadratic",
          [](nb::handle a, nb::handle b) {
            return Workload::quadratic(int64_argument(a, "workload: a"), int64_argument(b, "workload: b"));
          },
          "a"_a.none(), "b"_a.none(), "cost = a * L + b * L * L")
      .def_static(
          "parse",
          [](nb::handle spec) {
            if (!nb::isinstance<nb::str>(spec)) {
              throw_invalid(std::string("workload: spec = ") + nb::repr(spec).c_str() +
                            " is not a string; expected tokens, verl or quadratic(a,b)");
            }
            return Workload::parse(nb::cast<std::string>(spec));
          },
          "spec"_a.none(), "'tokens', 'verl' or 'quadratic(a,b)'")
      .def(
          "cost",
          [](const Workload& w, nb::handle length) { return w.cost(int64_argument(length, "length")); },
          "length"_a.none())
      .def_prop_ro("name", &Workload::name)
      .def("__repr__", [](const Workload& w) { return "Workload(" + w.name() + ")"; })
      .def("__eq__", [](const Workload& a, const Workload& b) { return a.name() == b.name(); });

  m.def(
      "_partition",
      [](const Int64Input& weights, int64_t k, const std::string& cardinality,
         const Workload& workload, std::optional<Int64Input> groups, const std::string& algorithm) {
        balance::Options options;
        options.cardinality = balance::parse_cardinality(cardinality);
        options.algorithm = balance::parse_algorithm(algorithm);
        options.workload = workload;
        if (groups) options.groups = as_span(*groups);
        balance::Partition result;
        {
          GilReleased release;
          result = balance::partition(as_span(weights), k, options);
        }
        return partition_to_dict(std::move(result));
      },
      "weights"_a, "k"_a, "cardinality"_a, "workload"_a, "groups"_a.none(), "algorithm"_a);

  m.def(
      "_karmarkar_karp",
      [](const Int64Input& seqlens, int64_t k, bool equal_size) {
        GilReleased release;
        return balance::karmarkar_karp(as_span(seqlens), k, equal_size);
      },
      "seqlen_list"_a, "k_partitions"_a, "equal_size"_a);
  m.def(
      "_get_seqlen_balanced_partitions",
      [](const Int64Input& seqlens, int64_t k, bool equal_size) {
        GilReleased release;
        return balance::get_seqlen_balanced_partitions(as_span(seqlens), k, equal_size);
      },
      "seqlen_list"_a, "k_partitions"_a, "equal_size"_a);
}

}  // namespace seqflow::bindings
