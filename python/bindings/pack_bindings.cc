// seqflow.pack: plans, micro-batch plans and packed sequences are the C++
// objects, with read-only properties. Nested lists are built on first use
// and kept; arrays are numpy views of the object's vectors.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "bindings/arguments.h"
#include "bindings/arrays.h"
#include "bindings/gil.h"
#include "bindings/submodules.h"
#include "pack/xtuner_baseline.h"
#include "seqflow/error.h"
#include "seqflow/pack.h"
#include "seqflow/packed_sequence.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

using Nested = std::vector<std::vector<int64_t>>;
using PackState = std::tuple<std::vector<int64_t>, int64_t, int64_t>;  // samples, tokens, padding
using StatsState = std::tuple<Nested, Nested, std::vector<double>, std::vector<double>, std::vector<int64_t>,
                              std::vector<int64_t>, int64_t, int64_t, double, int64_t, int64_t, int64_t, int64_t>;
using PlanState = std::tuple<std::vector<int64_t>, int64_t, int64_t, int64_t, std::string, int64_t,
                             std::vector<std::vector<std::vector<PackState>>>, StatsState, std::vector<std::string>>;
using PackedState = std::tuple<nb::object, nb::object, nb::object, nb::object, nb::tuple, int64_t>;
using MicroBatchState = std::tuple<std::vector<Nested>, Nested, Nested, std::vector<int64_t>, int64_t>;

// A pack::Plan with the nested lists Python reads, built on first use.
struct PlanObject {
  pack::Plan plan;
  nb::object packs, pack_tokens, pack_padding;
};

struct MicroBatchObject {
  pack::MicroBatchPlan plan;
  nb::object batches, tokens, workloads;
};

// One materialised pack; the arrays are numpy's, or what `convert` made of them.
struct PackedObject {
  nb::object input_ids, labels, position_ids, cu_seqlens;
  nb::tuple samples;
  int64_t padding = 0;
};

// [rank][step] values as a read-only 2-D array (a copy: the rows are separate vectors).
nb::ndarray<nb::numpy, const int64_t, nb::ndim<2>> matrix(const Nested& rows, const char* name) {
  const size_t columns = rows.empty() ? 0 : rows[0].size();
  std::vector<int64_t> flat;
  flat.reserve(rows.size() * columns);
  for (const auto& row : rows) {
    if (row.size() != columns) throw_invalid(std::string("stats.") + name + " has rows of different lengths");
    flat.insert(flat.end(), row.begin(), row.end());
  }
  auto* owned = new std::vector<int64_t>(std::move(flat));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<int64_t>*>(p); });
  return {owned->data(), {rows.size(), columns}, owner};
}

// The Python value of a property, converted on first use and kept.
template <typename T>
const nb::object& cached(nb::object& slot, const T& value) {
  if (!slot.is_valid()) slot = nb::cast(value);
  return slot;
}

// Pack member `field` of every pack as nested lists [rank][step][slot],
// built on first use and kept in `slot`.
template <auto field>
const nb::object& per_pack(const pack::Plan& plan, nb::object& slot) {
  if (slot.is_valid()) return slot;
  nb::list ranks;
  for (const auto& rank : plan.packs) {
    nb::list steps;
    for (const auto& step : rank) {
      nb::list packs;
      for (const pack::Pack& p : step) packs.append(nb::cast(p.*field));
      steps.append(packs);
    }
    ranks.append(steps);
  }
  slot = ranks;
  return slot;
}

std::string percent(double ratio, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f%%", digits, 100 * ratio);
  return text;
}

std::string plan_repr(const pack::Plan& plan) {
  const auto& packs = plan.stats.packs_per_step;
  std::string shown = "[";
  for (size_t i = 0; i < std::min<size_t>(packs.size(), 8); ++i) shown += (i ? ", " : "") + std::to_string(packs[i]);
  shown += packs.size() > 8 ? ", '...']" : "]";
  const auto& spread = plan.stats.token_spread;
  const double max_spread = spread.empty() ? 0.0 : *std::max_element(spread.begin(), spread.end());
  return "PackPlan(samples=" + std::to_string(plan.lengths.size()) + ", dp_size=" + std::to_string(plan.dp_size) +
         ", optimizer_steps=" + std::to_string(plan.optimizer_steps) +
         ", pack_max_length=" + std::to_string(plan.pack_max_length) + ", pad_to='" +
         std::string(pack::to_string(plan.pad_to)) + "', packs_per_step=" + shown +
         ", padding=" + percent(plan.stats.padding_ratio, 1) + ", max_token_spread=" + percent(max_spread, 2) +
         (plan.notes.empty() ? "" : ", " + std::to_string(plan.notes.size()) + " note(s)") + ")";
}

StatsState stats_state(const pack::Stats& s) {
  return {s.tokens,         s.workloads,          s.token_spread,     s.workload_spread,
          s.packs_per_step, s.min_packs_per_step, s.real_tokens,      s.padding_tokens,
          s.padding_ratio,  s.padding_packs,      s.empty_rank_steps, s.max_pack_tokens,
          s.packs_over_cap};
}

pack::Stats stats_of(const StatsState& t) {
  const auto& [tokens, workloads, token_spread, workload_spread, packs_per_step, min_packs_per_step, real_tokens,
               padding_tokens, padding_ratio, padding_packs, empty_rank_steps, max_pack_tokens, packs_over_cap] = t;
  return {tokens,        workloads,      token_spread,  workload_spread, packs_per_step,   min_packs_per_step,
          real_tokens,   padding_tokens, padding_ratio, padding_packs,   empty_rank_steps, max_pack_tokens,
          packs_over_cap};
}

PlanState plan_state(const pack::Plan& plan) {
  std::vector<std::vector<std::vector<PackState>>> packs;
  for (const auto& rank : plan.packs) {
    auto& steps = packs.emplace_back();
    for (const auto& step : rank) {
      auto& slots = steps.emplace_back();
      for (const pack::Pack& p : step) slots.emplace_back(p.samples, p.tokens, p.padding);
    }
  }
  return {plan.lengths,
          plan.dp_size,
          plan.optimizer_steps,
          plan.pack_max_length,
          std::string(pack::to_string(plan.pad_to)),
          plan.pad_chunk,
          std::move(packs),
          stats_state(plan.stats),
          plan.notes};
}

pack::Plan plan_of(const PlanState& state) {
  const auto& [lengths, dp_size, optimizer_steps, pack_max_length, pad_to, pad_chunk, packs, stats, notes] = state;
  pack::Plan plan{lengths,         dp_size, optimizer_steps, pack_max_length, pack::parse_pad_to(pad_to), pad_chunk, {},
                  stats_of(stats), notes};
  for (const auto& rank : packs) {
    auto& steps = plan.packs.emplace_back();
    for (const auto& step : rank) {
      auto& slots = steps.emplace_back();
      for (const auto& [samples, tokens, padding] : step) slots.push_back({samples, tokens, padding});
    }
  }
  return plan;
}

nb::dict plan_dict(nb::handle self) {
  const pack::Plan& plan = nb::cast<const PlanObject&>(self).plan;
  const pack::Stats& s = plan.stats;
  nb::dict stats;
  stats["tokens"] = s.tokens;
  stats["workloads"] = s.workloads;
  stats["token_spread"] = s.token_spread;
  stats["workload_spread"] = s.workload_spread;
  stats["packs_per_step"] = s.packs_per_step;
  stats["min_packs_per_step"] = s.min_packs_per_step;
  stats["real_tokens"] = s.real_tokens;
  stats["padding_tokens"] = s.padding_tokens;
  stats["padding_ratio"] = s.padding_ratio;
  stats["padding_packs"] = s.padding_packs;
  stats["empty_rank_steps"] = s.empty_rank_steps;
  stats["max_pack_tokens"] = s.max_pack_tokens;
  stats["packs_over_cap"] = s.packs_over_cap;
  nb::dict out;
  out["dp_size"] = plan.dp_size;
  out["optimizer_steps"] = plan.optimizer_steps;
  out["pack_max_length"] = plan.pack_max_length;
  out["pad_to"] = std::string(pack::to_string(plan.pad_to));
  out["pad_chunk"] = plan.pad_chunk;
  for (const char* name : {"packs", "pack_tokens", "pack_padding"}) out[name] = self.attr(name);
  out["stats"] = stats;
  out["notes"] = plan.notes;
  return out;
}

using Rank = IntegerParameter<"rank">;
using Step = IntegerParameter<"step">;
using Slot = IntegerParameter<"slot">;

// Sample i's ids: one int64 array each, or (offsets given) sample i is
// flat[offsets[i]:offsets[i + 1]] of the one array given.
std::vector<std::span<const int64_t>> samples_of(const std::vector<Int64Input>& arrays,
                                                 const std::optional<Int64Input>& offsets, const char* name) {
  if (offsets) {
    if (arrays.size() != 1) throw_invalid(std::string(name) + ": offsets go with one flat array of values");
    return pack::split_flat(as_span(arrays[0]), as_span(*offsets), name);
  }
  std::vector<std::span<const int64_t>> out;
  out.reserve(arrays.size());
  for (const auto& array : arrays) out.push_back(as_span(array));
  return out;
}

nb::object packed_object(pack::PackedSequence&& seq, nb::handle convert) {
  auto array = [&](auto&& values) -> nb::object {
    nb::object out = nb::cast(to_numpy(std::move(values)));
    return convert.is_none() ? out : convert(out);
  };
  return nb::cast(PackedObject{array(std::move(seq.input_ids)), array(std::move(seq.labels)),
                               array(std::move(seq.position_ids)), array(std::move(seq.cu_seqlens)),
                               nb::tuple(nb::cast(seq.samples)), seq.padding});
}

// The packs of a plan, for one (rank, step), one rank or every rank; `convert`
// (torch.from_numpy) turns each numpy array into what the caller asked for.
nb::object materialize(const PlanObject& plan_object, const std::vector<Int64Input>& token_ids,
                       const std::optional<Int64Input>& token_offsets,
                       const std::optional<std::vector<Int64Input>>& labels,
                       const std::optional<Int64Input>& label_offsets, std::optional<int64_t> rank,
                       std::optional<int64_t> step, int64_t pad_id, int64_t ignore_index,
                       const std::optional<nb::callable>& convert) {
  const pack::Plan& plan = plan_object.plan;
  const pack::MaterializeOptions options{pad_id, ignore_index};
  const auto ids = samples_of(token_ids, token_offsets, "token_ids");
  const auto labs = labels ? samples_of(*labels, label_offsets, "labels") : std::vector<std::span<const int64_t>>{};
  // [rank][step] -> packs, for the ranks and steps asked for.
  std::vector<std::vector<std::vector<pack::PackedSequence>>> packed;
  {
    GilReleased release;
    const int64_t first_rank = rank.value_or(0);
    const int64_t last_rank = rank ? first_rank + 1 : plan.dp_size;
    for (int64_t r = first_rank; r < last_rank; ++r) {
      auto& steps = packed.emplace_back();
      const int64_t first_step = step.value_or(0);
      const int64_t last_step = step ? first_step + 1 : plan.optimizer_steps;
      for (int64_t s = first_step; s < last_step; ++s) {
        steps.push_back(pack::materialize(plan, r, s, ids, labs, options));
      }
    }
  }
  const nb::handle converter = convert ? nb::handle(*convert) : nb::handle(nb::none());
  nb::list ranks;
  for (auto& steps : packed) {
    nb::list step_lists;
    for (auto& packs : steps) {
      nb::list out;
      for (auto& seq : packs) out.append(packed_object(std::move(seq), converter));
      step_lists.append(out);
    }
    ranks.append(step ? step_lists[0] : nb::object(step_lists));
  }
  return rank ? nb::object(ranks[0]) : nb::object(ranks);
}

std::string micro_batch_repr(const pack::MicroBatchPlan& plan) {
  int64_t largest = 0;
  for (const auto& rank : plan.tokens) {
    for (int64_t tokens : rank) largest = std::max(largest, tokens);
  }
  return "MicroBatchPlan(ranks=" + std::to_string(plan.batches.size()) +
         ", micro_batches per rank=" + std::to_string(plan.batches.empty() ? 0 : plan.batches[0].size()) +
         ", largest micro-batch=" + std::to_string(largest) +
         " tokens, empty_batches=" + std::to_string(plan.empty_batches) + ")";
}

std::vector<int64_t> micro_batch_order(const MicroBatchObject& self, const OptionalIntegerParameter<"rank">& rank) {
  return pack::micro_batch_order(self.plan, rank.value);
}

nb::object plan_object(pack::Plan&& plan) { return nb::cast(PlanObject{std::move(plan), {}, {}, {}}); }

nb::object micro_batch_object(pack::MicroBatchPlan&& plan) {
  return nb::cast(MicroBatchObject{std::move(plan), {}, {}, {}});
}

pack::MicroBatchOptions micro_batch_options(int64_t dp_size, bool same_count_across_ranks, int64_t count_multiple,
                                            const Workload& workload, const std::string& order) {
  return {dp_size, same_count_across_ranks, count_multiple, workload, pack::parse_micro_batch_order(order)};
}

// The classes read as seqflow.pack's own (repr, pickle).
template <typename Class>
Class& public_name(Class& cls) {
  cls.attr("__module__") = "seqflow.pack";
  return cls;
}

void bind_classes(nb::module_ m) {
  auto stats = nb::class_<pack::Stats>(m, "PackStats", "What a plan costs and how even it is.");
  stats
      .def_prop_ro(
          "tokens", [](const pack::Stats& s) { return matrix(s.tokens, "tokens"); }, kArray, "[rank, step] real tokens")
      .def_prop_ro(
          "workloads", [](const pack::Stats& s) { return matrix(s.workloads, "workloads"); }, kArray,
          "[rank, step] workload")
      .def_prop_ro(
          "token_spread", [](const pack::Stats& s) { return view_of(s.token_spread, s); }, kArray,
          "per step: (max - min) / mean of tokens across ranks")
      .def_prop_ro(
          "workload_spread", [](const pack::Stats& s) { return view_of(s.workload_spread, s); }, kArray)
      .def_prop_ro(
          "packs_per_step", [](const pack::Stats& s) { return view_of(s.packs_per_step, s); }, kArray)
      .def_prop_ro(
          "min_packs_per_step", [](const pack::Stats& s) { return view_of(s.min_packs_per_step, s); }, kArray,
          "per step: max over ranks of ceil(tokens / pack_max_length)")
      .def_ro("real_tokens", &pack::Stats::real_tokens)
      .def_ro("padding_tokens", &pack::Stats::padding_tokens)
      .def_ro("padding_ratio", &pack::Stats::padding_ratio, "padding tokens / all tokens")
      .def_ro("padding_packs", &pack::Stats::padding_packs, "packs without samples")
      .def_ro("empty_rank_steps", &pack::Stats::empty_rank_steps, "(rank, step) pairs without samples")
      .def_ro("max_pack_tokens", &pack::Stats::max_pack_tokens)
      .def_ro("packs_over_cap", &pack::Stats::packs_over_cap, "always 0 for plan; the baseline may break the cap")
      .def("__getstate__", &stats_state)
      .def("__setstate__", [](pack::Stats& s, const StatsState& state) { new (&s) pack::Stats(stats_of(state)); });
  public_name(stats);

  auto plan = nb::class_<PlanObject>(
      m, "PackPlan",
      "packs[rank][step] is a list of packs; a pack is a list of sample indexes. pack_tokens and pack_padding\n"
      "give each pack's real and padding tokens; the padding is made of padding sequences of at most pad_chunk\n"
      "tokens (see padding_sequences). notes say what a user should know.");
  plan.def_prop_ro("packs", [](PlanObject& p) { return per_pack<&pack::Pack::samples>(p.plan, p.packs); })
      .def_prop_ro("pack_tokens", [](PlanObject& p) { return per_pack<&pack::Pack::tokens>(p.plan, p.pack_tokens); })
      .def_prop_ro("pack_padding", [](PlanObject& p) { return per_pack<&pack::Pack::padding>(p.plan, p.pack_padding); })
      .def_prop_ro(
          "lengths", [](const PlanObject& p) { return view_of(p.plan.lengths, p); }, kArray, "tokens per sample")
      .def_prop_ro("dp_size", [](const PlanObject& p) { return p.plan.dp_size; })
      .def_prop_ro("optimizer_steps", [](const PlanObject& p) { return p.plan.optimizer_steps; })
      .def_prop_ro("pack_max_length", [](const PlanObject& p) { return p.plan.pack_max_length; })
      .def_prop_ro("pad_to", [](const PlanObject& p) { return std::string(pack::to_string(p.plan.pad_to)); })
      .def_prop_ro("pad_chunk", [](const PlanObject& p) { return p.plan.pad_chunk; })
      .def_prop_ro(
          "stats", [](const PlanObject& p) -> const pack::Stats& { return p.plan.stats; },
          nb::rv_policy::reference_internal)
      .def_prop_ro("notes", [](const PlanObject& p) { return p.plan.notes; })
      .def(
          "padding_sequences",
          [](const PlanObject& p, Rank rank, Step step, Slot slot) {
            return pack::padding_sequences(pack::pack_at(p.plan, rank, step, slot).padding, p.plan.pad_chunk);
          },
          "rank"_a, "step"_a, "slot"_a, "Lengths of the padding sequences that end pack `slot` of (rank, step).")
      .def(
          "padded_length",
          [](const PlanObject& p, Rank rank, Step step, Slot slot) {
            return pack::pack_at(p.plan, rank, step, slot).padded_length();
          },
          "rank"_a, "step"_a, "slot"_a)
      .def("to_dict", &plan_dict, "A JSON-ready dict: the packs, their padding, the stats and the notes.")
      .def("__repr__", [](const PlanObject& p) { return plan_repr(p.plan); })
      .def("__getstate__", [](const PlanObject& p) { return plan_state(p.plan); })
      .def("__setstate__", [](PlanObject& p, const PlanState& state) {
        new (&p) PlanObject{plan_of(state), {}, {}, {}};
      });
  public_name(plan);

  auto micro = nb::class_<MicroBatchObject>(
      m, "MicroBatchPlan",
      "batches[rank][i] lists the sample indexes of micro-batch i of `rank`, in the planned order. tokens and\n"
      "workloads are per rank, per micro-batch. min_counts[rank] is the fewest micro-batches that rank alone\n"
      "needs under the cap; empty_batches counts micro-batches without samples.");
  micro.def_prop_ro("batches", [](MicroBatchObject& p) { return cached(p.batches, p.plan.batches); })
      .def_prop_ro("tokens", [](MicroBatchObject& p) { return cached(p.tokens, p.plan.tokens); })
      .def_prop_ro("workloads", [](MicroBatchObject& p) { return cached(p.workloads, p.plan.workloads); })
      .def_prop_ro(
          "min_counts", [](const MicroBatchObject& p) { return view_of(p.plan.min_counts, p); }, kArray)
      .def_prop_ro("empty_batches", [](const MicroBatchObject& p) { return p.plan.empty_batches; })
      .def_prop_ro("counts",
                   [](const MicroBatchObject& p) {
                     std::vector<size_t> counts;
                     for (const auto& rank : p.plan.batches) counts.push_back(rank.size());
                     return counts;
                   })
      .def(
          "order",
          [](const MicroBatchObject& p, const OptionalIntegerParameter<"rank">& rank) {
            return to_numpy(micro_batch_order(p, rank));
          },
          "rank"_a.none() = nb::none(),
          "Sample indexes in micro-batch order: of one rank, or of all ranks, rank by rank.")
      .def(
          "restore_order",
          [](const MicroBatchObject& p, const OptionalIntegerParameter<"rank">& rank) {
            return to_numpy(pack::restore_order(micro_batch_order(p, rank)));
          },
          "rank"_a.none() = nb::none(),
          "Positions such that outputs[positions] lists the outputs of order(rank) by ascending sample index.")
      .def("__repr__", [](const MicroBatchObject& p) { return micro_batch_repr(p.plan); })
      .def("__getstate__",
           [](const MicroBatchObject& p) {
             const auto& q = p.plan;
             return MicroBatchState{q.batches, q.tokens, q.workloads, q.min_counts, q.empty_batches};
           })
      .def("__setstate__", [](MicroBatchObject& p, const MicroBatchState& state) {
        const auto& [batches, tokens, workloads, min_counts, empty_batches] = state;
        new (&p) MicroBatchObject{{batches, tokens, workloads, min_counts, empty_batches}, {}, {}, {}};
      });
  public_name(micro);

  auto packed = nb::class_<PackedObject>(
      m, "PackedSequence",
      "One pack, ready for a varlen attention kernel. input_ids, labels, position_ids: flat, of the padded\n"
      "length; labels hold ignore_index on padding. cu_seqlens: int32 boundaries of the samples, then of the\n"
      "padding sequences. samples: the sample indexes in order.");
  packed
      .def(
          "__init__",
          [](PackedObject* p, nb::object input_ids, nb::object labels, nb::object position_ids, nb::object cu_seqlens,
             nb::tuple samples,
             int64_t padding) { new (p) PackedObject{input_ids, labels, position_ids, cu_seqlens, samples, padding}; },
          "input_ids"_a, "labels"_a, "position_ids"_a, "cu_seqlens"_a, "samples"_a, "padding"_a)
      .def_ro("input_ids", &PackedObject::input_ids)
      .def_ro("labels", &PackedObject::labels)
      .def_ro("position_ids", &PackedObject::position_ids)
      .def_ro("cu_seqlens", &PackedObject::cu_seqlens)
      .def_ro("samples", &PackedObject::samples)
      .def_ro("padding", &PackedObject::padding)
      .def("__repr__",
           [](const PackedObject& p) {
             return "PackedSequence(input_ids=" + std::string(nb::repr(p.input_ids).c_str()) +
                    ", labels=" + nb::repr(p.labels).c_str() + ", position_ids=" + nb::repr(p.position_ids).c_str() +
                    ", cu_seqlens=" + nb::repr(p.cu_seqlens).c_str() + ", samples=" + nb::repr(p.samples).c_str() +
                    ", padding=" + std::to_string(p.padding) + ")";
           })
      .def("__getstate__",
           [](const PackedObject& p) {
             return nb::make_tuple(p.input_ids, p.labels, p.position_ids, p.cu_seqlens, p.samples, p.padding);
           })
      .def("__setstate__", [](PackedObject& p, const PackedState& t) {
        new (&p) PackedObject{std::get<0>(t), std::get<1>(t), std::get<2>(t),
                              std::get<3>(t), std::get<4>(t), std::get<5>(t)};
      });
  public_name(packed);
}

// progress(phase, done, total), called on the planner's thread with the GIL
// taken (the plan runs without it). The callable is the caller's argument,
// alive for the whole call, so the callback holds a handle, no reference of
// its own: copies of it made and dropped without the GIL touch no refcount.
pack::PlanProgressCallback progress_callback(const std::optional<nb::callable>& progress) {
  if (!progress) return {};
  return [callable = nb::handle(*progress)](const pack::PlanProgress& at) {
    GilHeld gil;
    callable(std::string(pack::to_string(at.phase)), at.done, at.total);
  };
}

}  // namespace

void bind_pack(nb::module_ m) {
  m.attr("MAX_PACK_LENGTH") = pack::kMaxPackLength;
  m.attr("MAX_PLAN_LISTS") = pack::kMaxPlanLists;
  m.attr("MAX_PADDING_SEQUENCES") = pack::kMaxPaddingSequences;
  bind_classes(m);

  // Typed calls under seqflow.pack's Python functions, which convert the user's arguments.
  m.def(
      "plan",
      [](const Int64Input& lengths, int64_t dp_size, int64_t optimizer_steps, int64_t pack_max_length,
         const std::optional<Int64Input>& groups, const Workload& workload, const std::string& pad_to,
         int64_t pad_chunk, uint64_t seed, const std::optional<nb::callable>& progress) {
        pack::Options options;
        options.seed = seed;
        options.dp_size = dp_size;
        options.optimizer_steps = optimizer_steps;
        options.pack_max_length = pack_max_length;
        if (groups) options.groups = as_span(*groups);
        options.workload = workload;
        options.pad_to = pack::parse_pad_to(pad_to);
        options.pad_chunk = pad_chunk;
        options.progress = progress_callback(progress);
        pack::Plan result;
        {
          GilReleased release;
          result = pack::plan(as_span(lengths), options);
        }
        return plan_object(std::move(result));
      },
      "lengths"_a, "dp_size"_a, "optimizer_steps"_a, "pack_max_length"_a, "groups"_a.none(), "workload"_a, "pad_to"_a,
      "pad_chunk"_a, "seed"_a, "progress"_a.none(), "seqflow.pack.plan with its arguments converted.");

  m.def(
      "xtuner_baseline",
      [](const Int64Input& lengths, int64_t dp_size, int64_t optimizer_steps, int64_t pack_max_length,
         int64_t pad_chunk) {
        pack::Plan result;
        {
          GilReleased release;
          result = pack::baseline::xtuner_pack(as_span(lengths), dp_size, optimizer_steps, pack_max_length, pad_chunk);
        }
        return plan_object(std::move(result));
      },
      "lengths"_a, "dp_size"_a, "optimizer_steps"_a, "pack_max_length"_a, "pad_chunk"_a,
      "seqflow.pack.xtuner_baseline with its arguments converted.");

  m.def(
      "micro_batches",
      [](const Int64Input& lengths, int64_t max_token_len, int64_t dp_size, bool same_count_across_ranks,
         int64_t count_multiple, const Workload& workload, const std::string& order) {
        const auto options = micro_batch_options(dp_size, same_count_across_ranks, count_multiple, workload, order);
        pack::MicroBatchPlan result;
        {
          GilReleased release;
          result = pack::micro_batches(as_span(lengths), max_token_len, options);
        }
        return micro_batch_object(std::move(result));
      },
      "lengths"_a, "max_token_len"_a, "dp_size"_a, "same_count_across_ranks"_a, "count_multiple"_a, "workload"_a,
      "order"_a, "seqflow.pack.micro_batches of one sequence of all samples, its arguments converted.");
  m.def(
      "micro_batches_per_rank",
      [](const std::vector<Int64Input>& ranks, int64_t max_token_len, int64_t dp_size, bool same_count_across_ranks,
         int64_t count_multiple, const Workload& workload, const std::string& order) {
        const auto options = micro_batch_options(dp_size, same_count_across_ranks, count_multiple, workload, order);
        std::vector<std::span<const int64_t>> spans;
        for (const auto& rank : ranks) spans.push_back(as_span(rank));
        pack::MicroBatchPlan result;
        {
          GilReleased release;
          result = pack::micro_batches_per_rank(spans, max_token_len, options);
        }
        return micro_batch_object(std::move(result));
      },
      "ranks"_a, "max_token_len"_a, "dp_size"_a, "same_count_across_ranks"_a, "count_multiple"_a, "workload"_a,
      "order"_a, "seqflow.pack.micro_batches of one sequence per rank, already placed, its arguments converted.");

  // seqflow.compat.verl's rearrange_micro_batches: needs (lower, longest,
  // planned, groups) and fits are combined over data-parallel ranks in Python.
  using VerlNeeds = std::tuple<int64_t, int64_t, int64_t, int64_t>;
  const auto verl_options = [](int64_t max_token_len, int64_t force_group_size, int64_t min_count,
                               int64_t count_multiple, bool balance_order) {
    return pack::VerlMicroBatchOptions{max_token_len, force_group_size, min_count, count_multiple, balance_order};
  };
  const auto agreed_needs = [](const VerlNeeds& needs) {
    const auto& [lower, longest, planned, groups] = needs;
    return pack::VerlMicroBatchNeeds{lower, longest, planned, groups};
  };
  m.def(
      "verl_micro_batch_needs",
      [verl_options](const Int64Input& lengths, int64_t max_token_len, int64_t force_group_size, int64_t min_count,
                     int64_t count_multiple) {
        GilReleased release;
        auto needs = pack::verl_micro_batch_needs(
            as_span(lengths), verl_options(max_token_len, force_group_size, min_count, count_multiple, false));
        return VerlNeeds{needs.lower, needs.longest, needs.planned, needs.groups};
      },
      "lengths"_a, "max_token_len"_a, "force_group_size"_a, "min_count"_a, "count_multiple"_a,
      "This rank's (lower, longest, planned, groups) for verl's rearrange_micro_batches.");
  m.def(
      "verl_split_fits",
      [verl_options, agreed_needs](const Int64Input& lengths, int64_t max_token_len, int64_t force_group_size,
                                   int64_t min_count, int64_t count_multiple, const VerlNeeds& agreed) {
        GilReleased release;
        return pack::verl_split_fits(as_span(lengths),
                                     verl_options(max_token_len, force_group_size, min_count, count_multiple, false),
                                     agreed_needs(agreed));
      },
      "lengths"_a, "max_token_len"_a, "force_group_size"_a, "min_count"_a, "count_multiple"_a, "agreed"_a,
      "1 or 0 per count tried below the planner's: whether verl's split fits this rank.");
  m.def(
      "verl_micro_batches",
      [verl_options, agreed_needs](const Int64Input& lengths, int64_t max_token_len, int64_t force_group_size,
                                   int64_t min_count, int64_t count_multiple, bool balance_order,
                                   const std::optional<VerlNeeds>& agreed, const std::optional<Int64Input>& fits) {
        const auto options = verl_options(max_token_len, force_group_size, min_count, count_multiple, balance_order);
        if (agreed.has_value() != fits.has_value()) throw_invalid("agreed and agreed_fits go together");
        GilReleased release;
        if (!agreed) return pack::verl_micro_batches(as_span(lengths), options);
        return pack::verl_micro_batches(as_span(lengths), options, agreed_needs(*agreed), as_span(*fits));
      },
      "lengths"_a, "max_token_len"_a, "force_group_size"_a, "min_count"_a, "count_multiple"_a, "balance_order"_a,
      "agreed"_a.none(), "agreed_fits"_a.none(),
      "Row indexes per micro-batch of verl's rearrange_micro_batches; agreed and agreed_fits\n"
      "combined over ranks, or None for a rank alone.");

  m.def("materialize", &materialize, "plan"_a, "token_ids"_a, "token_offsets"_a.none(), "labels"_a.none(),
        "label_offsets"_a.none(), "rank"_a.none(), "step"_a.none(), "pad_id"_a, "ignore_index"_a, "convert"_a.none(),
        "seqflow.pack.materialize with its arguments converted: the token ids (and labels) as one int64 array\n"
        "per sample, or one flat array and its offsets.");
  m.def(
      "inverse_permutation",
      [](const Int64Input& order) { return to_numpy(pack::inverse_permutation(as_span(order))); }, "order"_a,
      "inverse[order[i]] = i. For outputs laid out in `order` (a permutation of\n"
      "0..n-1), outputs[inverse] restores the original order.");
  m.def("padding_sequences", &pack::padding_sequences, "padding"_a, "pad_chunk"_a,
        "seqflow.pack.padding_sequences with its arguments converted.");
}

}  // namespace seqflow::bindings
