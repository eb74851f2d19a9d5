// _seqflow.client's replay selection types: the cursor one sample() carries
// from pass to pass, a pass's answer, and what a resume re-issued (seqflow/replay.h).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings/json_conversion.h"
#include "bindings/submodules.h"
#include "seqflow/replay.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

void bind_replay(nb::module_ m) {
  nb::class_<ReplayCursor>(m, "ReplayCursor",
                           "What one replay sample() carries from pass to pass: the refill credit and draining of "
                           "sync DAPO, and the evictions so far.")
      .def(nb::init<>())
      .def_ro("refill_credit", &ReplayCursor::refill_credit)
      .def_ro("draining", &ReplayCursor::draining)
      .def(
          "metrics",
          [](const ReplayCursor& cursor, const std::string& prefix) { return cursor.evictions.metrics(prefix); },
          "prefix"_a, "verl's eviction metrics so far, named under prefix ('training', 'validation').")
      .def_prop_ro(
          "filtered_values", [](const ReplayCursor& cursor) { return cursor.evictions.filtered_values; },
          "(value, groups): how many filtered groups shared each value (verl's _dapo_filtered_reward_counts).");
  nb::class_<ReplayPass>(m, "ReplayPass", "One replay pass's answer (Client.replay_pass).")
      .def_ro("refill", &ReplayPass::refill)
      .def_ro("ready", &ReplayPass::ready)
      .def_ro("sampleable", &ReplayPass::sampleable)
      .def_ro("sampleable_uids", &ReplayPass::sampleable_uids)
      .def_ro("selected_uids", &ReplayPass::selected_uids)
      .def_ro("keys", &ReplayPass::keys)
      .def_prop_ro("tags",
                   [](const ReplayPass& pass) {
                     nb::list tags;
                     for (const Value& tag : pass.tags) tags.append(from_value(tag));
                     return tags;
                   })
      .def_ro("cursor", &ReplayPass::cursor)
      .def_ro("unclassified_keys", &ReplayPass::unclassified_keys,
              "group_filter_metric: the trajectory keys of finished groups the pass needs values for "
              "(held in flight until a pass brings them).")
      .def_ro("kept", &ReplayPass::kept, "Kept under its pass_id until acknowledged (Client.ack_replay_pass).")
      .def_ro("rank_sizes", &ReplayPass::rank_sizes,
              "balance_ranks: each rank's trajectory count; keys and tags come rank by rank.")
      .def_ro("rank_lengths", &ReplayPass::rank_lengths, "balance_ranks: each rank's sum of lengths.")
      .def_ro("arrival_rank_lengths", &ReplayPass::arrival_rank_lengths,
              "balance_ranks: the length sums of as many equal chunks of the arrival order (before balancing).");
  nb::class_<ReissuedPrompts>(
      m, "ReissuedPrompts",
      "Client.reissue_inflight_prompts's answer: the prompts in flight (with member_status, also "
      "terminal ones whose members were in flight), tagged pending again.")
      .def_ro("keys", &ReissuedPrompts::keys, "The prompt keys re-issued, in arrival order.")
      .def_ro("cleared_trajectories", &ReissuedPrompts::cleared_trajectories,
              "How many of their trajectory keys were cleared.");
}

}  // namespace seqflow::bindings
