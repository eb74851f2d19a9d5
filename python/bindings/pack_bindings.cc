// seqflow.pack: the pack planner, the micro-batch planner and the xtuner
// baseline. Plans come back as plain Python lists and numpy arrays; the
// Python wrapper (python/seqflow/pack.py) turns them into dataclasses.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings/arrays.h"
#include "bindings/gil.h"
#include "bindings/submodules.h"
#include "pack/xtuner_baseline.h"
#include "seqflow/pack.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

using Int64Matrix = nb::ndarray<nb::numpy, int64_t, nb::ndim<2>>;
using FloatArray = nb::ndarray<nb::numpy, double, nb::ndim<1>>;

// A rows x columns array owning the flattened values.
Int64Matrix to_numpy_2d(const std::vector<std::vector<int64_t>>& rows) {
  const size_t columns = rows.empty() ? 0 : rows[0].size();
  auto* owned = new std::vector<int64_t>();
  owned->reserve(rows.size() * columns);
  for (const auto& row : rows) owned->insert(owned->end(), row.begin(), row.end());
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<int64_t>*>(p); });
  return Int64Matrix(owned->data(), {rows.size(), columns}, owner);
}

FloatArray to_float_numpy(std::vector<double>&& values) {
  auto* owned = new std::vector<double>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<double>*>(p); });
  return FloatArray(owned->data(), {owned->size()}, owner);
}

nb::list int_list(const std::vector<int64_t>& values) {
  nb::list out;
  for (int64_t v : values) out.append(v);
  return out;
}

nb::dict stats_to_dict(pack::Stats&& stats) {
  nb::dict out;
  out["tokens"] = to_numpy_2d(stats.tokens);
  out["workloads"] = to_numpy_2d(stats.workloads);
  out["token_spread"] = to_float_numpy(std::move(stats.token_spread));
  out["workload_spread"] = to_float_numpy(std::move(stats.workload_spread));
  out["packs_per_step"] = bindings::to_numpy(std::move(stats.packs_per_step));
  out["min_packs_per_step"] = bindings::to_numpy(std::move(stats.min_packs_per_step));
  out["real_tokens"] = stats.real_tokens;
  out["padding_tokens"] = stats.padding_tokens;
  out["padding_ratio"] = stats.padding_ratio;
  out["padding_packs"] = stats.padding_packs;
  out["empty_rank_steps"] = stats.empty_rank_steps;
  out["max_pack_tokens"] = stats.max_pack_tokens;
  out["packs_over_cap"] = stats.packs_over_cap;
  return out;
}

// packs[rank][step][slot] -> sample indexes; tokens and padding likewise
// nested down to one int per pack.
nb::dict plan_to_dict(pack::Plan&& plan) {
  nb::list packs;
  nb::list tokens;
  nb::list padding;
  for (const auto& rank : plan.packs) {
    nb::list rank_packs;
    nb::list rank_tokens;
    nb::list rank_padding;
    for (const auto& step : rank) {
      nb::list step_packs;
      nb::list step_tokens;
      nb::list step_padding;
      for (const pack::Pack& p : step) {
        step_packs.append(int_list(p.samples));
        step_tokens.append(p.tokens);
        step_padding.append(p.padding);
      }
      rank_packs.append(step_packs);
      rank_tokens.append(step_tokens);
      rank_padding.append(step_padding);
    }
    packs.append(rank_packs);
    tokens.append(rank_tokens);
    padding.append(rank_padding);
  }
  nb::dict out;
  out["packs"] = packs;
  out["pack_tokens"] = tokens;
  out["pack_padding"] = padding;
  out["dp_size"] = plan.dp_size;
  out["optimizer_steps"] = plan.optimizer_steps;
  out["pack_max_length"] = plan.pack_max_length;
  out["pad_to"] = std::string(pack::to_string(plan.pad_to));
  out["pad_chunk"] = plan.pad_chunk;
  out["stats"] = stats_to_dict(std::move(plan.stats));
  out["notes"] = plan.notes;
  return out;
}

nb::dict micro_batch_plan_to_dict(pack::MicroBatchPlan&& plan) {
  nb::list batches;
  for (const auto& rank : plan.batches) {
    nb::list rank_batches;
    for (const auto& batch : rank) rank_batches.append(int_list(batch));
    batches.append(rank_batches);
  }
  nb::dict out;
  out["batches"] = batches;
  out["tokens"] = plan.tokens;
  out["workloads"] = plan.workloads;
  out["min_counts"] = bindings::to_numpy(std::move(plan.min_counts));
  out["empty_batches"] = plan.empty_batches;
  return out;
}

}  // namespace

void bind_pack(nb::module_ m) {
  m.attr("MAX_PACK_LENGTH") = pack::kMaxPackLength;
  m.attr("MAX_PLAN_LISTS") = pack::kMaxPlanLists;
  m.attr("MAX_PADDING_SEQUENCES") = pack::kMaxPaddingSequences;
  m.def(
      "_plan",
      [](const Int64Input& lengths, int64_t dp_size, int64_t optimizer_steps, int64_t pack_max_length,
         std::optional<Int64Input> groups, const Workload& workload, const std::string& pad_to,
         int64_t pad_chunk, uint64_t seed) {
        pack::Options options;
        options.dp_size = dp_size;
        options.optimizer_steps = optimizer_steps;
        options.pack_max_length = pack_max_length;
        if (groups) options.groups = as_span(*groups);
        options.workload = workload;
        options.pad_to = pack::parse_pad_to(pad_to);
        options.pad_chunk = pad_chunk;
        options.seed = seed;
        pack::Plan result;
        {
          GilReleased release;
          result = pack::plan(as_span(lengths), options);
        }
        return plan_to_dict(std::move(result));
      },
      "lengths"_a, "dp_size"_a, "optimizer_steps"_a, "pack_max_length"_a, "groups"_a.none(),
      "workload"_a, "pad_to"_a, "pad_chunk"_a, "seed"_a);

  m.def(
      "_xtuner_baseline",
      [](const Int64Input& lengths, int64_t dp_size, int64_t optimizer_steps, int64_t pack_max_length,
         int64_t pad_chunk) {
        pack::Plan result;
        {
          GilReleased release;
          result = pack::baseline::xtuner_pack(as_span(lengths), dp_size, optimizer_steps,
                                               pack_max_length, pad_chunk);
        }
        return plan_to_dict(std::move(result));
      },
      "lengths"_a, "dp_size"_a, "optimizer_steps"_a, "pack_max_length"_a, "pad_chunk"_a);

  m.def(
      "_micro_batches",
      [](const Int64Input& lengths, int64_t max_token_len, int64_t dp_size, bool same_count,
         int64_t count_multiple, const Workload& workload, const std::string& order) {
        pack::MicroBatchOptions options{dp_size, same_count, count_multiple, workload,
                                        pack::parse_micro_batch_order(order)};
        pack::MicroBatchPlan result;
        {
          GilReleased release;
          result = pack::micro_batches(as_span(lengths), max_token_len, options);
        }
        return micro_batch_plan_to_dict(std::move(result));
      },
      "lengths"_a, "max_token_len"_a, "dp_size"_a, "same_count_across_ranks"_a, "count_multiple"_a,
      "workload"_a, "order"_a);

  m.def(
      "_micro_batches_per_rank",
      [](const std::vector<Int64Input>& lengths_per_rank, int64_t max_token_len, int64_t dp_size,
         bool same_count, int64_t count_multiple, const Workload& workload, const std::string& order) {
        pack::MicroBatchOptions options{dp_size, same_count, count_multiple, workload,
                                        pack::parse_micro_batch_order(order)};
        std::vector<std::span<const int64_t>> spans;
        for (const auto& rank : lengths_per_rank) spans.push_back(as_span(rank));
        pack::MicroBatchPlan result;
        {
          GilReleased release;
          result = pack::micro_batches_per_rank(spans, max_token_len, options);
        }
        return micro_batch_plan_to_dict(std::move(result));
      },
      "lengths_per_rank"_a, "max_token_len"_a, "dp_size"_a, "same_count_across_ranks"_a,
      "count_multiple"_a, "workload"_a, "order"_a);

  m.def(
      "_inverse_permutation",
      [](const Int64Input& order) { return bindings::to_numpy(pack::inverse_permutation(as_span(order))); },
      "order"_a);
  m.def("_padding_sequences", &pack::padding_sequences, "padding"_a, "pad_chunk"_a);
}

}  // namespace seqflow::bindings
