// The replay state in the controller checkpoint (replay_checkpoint_codec.h).
#include "core/replay_checkpoint_codec.h"

#include <algorithm>
#include <set>
#include <chrono>
#include <cmath>
#include <span>
#include <utility>
#include <vector>

#include "core/name_rule.h"
#include "core/replay_selection.h"
#include "seqflow/error.h"

namespace seqflow::core {
namespace {

constexpr std::string_view kKey = "replay_groups";
constexpr std::string_view kPassesKey = "replay_passes";

}  // namespace

void write_replay_groups(MsgpackMapWriter& checkpoint, const ControlData& data,
                         const std::map<std::string, GroupFilterCache>& filters) {
  std::vector<std::pair<const PartitionState*, const GroupFilterCache*>> saved;
  for (const auto& [partition_id, cache] : filters) {
    const PartitionState* partition = data.find(partition_id);
    if (partition != nullptr && partition->number() == cache.partition_number() && !cache.classification().empty()) {
      saved.emplace_back(partition, &cache);
    }
  }
  if (saved.empty()) return;
  MsgpackWriter& list = checkpoint.set(kKey);
  list.array(saved.size());
  for (const auto& [partition, cache] : saved) {
    // Sorted: the same state writes the same bytes.
    std::vector<std::pair<std::string, std::optional<double>>> groups(cache->classification().begin(),
                                                                      cache->classification().end());
    std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> kept;
    std::vector<std::string> filtered;
    std::vector<double> values;
    for (const auto& [uid, value] : groups) {
      if (!partition->key_slot(uid)) continue;  // its prompt key was cleared since: nothing to classify
      if (value) {
        filtered.push_back(uid);
        values.push_back(*value);
      } else {
        kept.push_back(uid);
      }
    }
    MsgpackMapWriter map;
    map.set("partition").string(partition->name());
    map.set("source").string(cache->source());
    map.set("kept").strings(kept);
    map.set("filtered").strings(filtered);
    map.set("filtered_values").numbers(std::span<const double>(values));
    map.write(list);
  }
}

std::map<std::string, GroupFilterCache> read_replay_groups(const EncodedMap& checkpoint, const ControlData& data) {
  std::map<std::string, GroupFilterCache> filters;
  if (!checkpoint.has(kKey)) return filters;
  const std::vector<std::string_view> entries = checkpoint.elements(kKey, "must be an array of partitions");
  for (size_t e = 0; e < entries.size(); ++e) {
    const auto map =
        EncodedMap::skipping_unknown(entries[e], checkpoint.depth() + 2, std::string(kKey) + " " + std::to_string(e),
                                     {"partition", "source", "kept", "filtered", "filtered_values"});
    const std::string partition_id = map.text("partition");
    check_name(partition_id, std::string(kKey) + " partition");
    if (filters.count(partition_id)) map.fail("partition", "names partition '" + partition_id + "' again");
    const PartitionState* partition = data.find(partition_id);
    std::string source = map.text("source");
    if (!source.starts_with("tag:") && !source.starts_with("metric:")) {
      map.fail("source", "must be 'tag:' or 'metric:' and a name, got '" + source + "'");
    }
    const std::vector<std::string> kept = map.texts("kept");
    const std::vector<std::string> filtered = map.texts("filtered");
    const auto values = map.numbers<double>("filtered_values");
    if (values.size() != filtered.size()) map.fail("filtered_values", "must hold one value per filtered group");
    GroupFilterCache::Classification classification;
    std::set<std::string_view> named;
    // A group whose prompt key the partition no longer holds (cleared after
    // it was classified, by a build that wrote it anyway) is left out: the
    // classification is of groups that exist.
    auto add = [&](const std::string& uid, std::optional<double> value) {
      check_name(uid, std::string(kKey) + " uid");
      if (!named.insert(uid).second) {
        map.fail(value ? "filtered" : "kept", "names group '" + uid + "' a second time (kept and filtered)");
      }
      if (partition != nullptr && partition->key_slot(uid)) classification.emplace(uid, value);
    };
    for (const std::string& uid : kept) add(uid, std::nullopt);
    for (size_t i = 0; i < filtered.size(); ++i) {
      if (!std::isfinite(values[i])) map.fail("filtered_values", "must be finite numbers");
      add(filtered[i], values[i]);
    }
    if (partition == nullptr || classification.empty()) continue;
    filters.emplace(partition_id, GroupFilterCache(partition->number(), std::move(source), std::move(classification)));
  }
  return filters;
}

namespace {

// The prompts of `held` that the partition still holds, with the generation
// they were held at (a cleared prompt's index may hold another sample now).
std::vector<ReplayLeases::Prompt> resolved(const ControlData& data, const std::string& partition_id,
                                           const std::vector<ReplayLeases::Prompt>& held) {
  std::vector<ReplayLeases::Prompt> out;
  const PartitionState* partition = data.find(partition_id);
  if (partition == nullptr) return out;
  for (const ReplayLeases::Prompt& prompt : held) {
    if (prompt.global_index >= 0 && data.slot_of(*partition, prompt.global_index) &&
        data.generation(prompt.global_index) == prompt.generation) {
      out.push_back(prompt);
    }
  }
  return out;
}

}  // namespace

void write_replay_passes(MsgpackMapWriter& checkpoint, const ControlData& data, const ReplayLeases& leases,
                         ReplayLeases::Clock::time_point now) {
  if (leases.kept().empty()) return;
  MsgpackWriter& list = checkpoint.set(kPassesKey);
  list.array(leases.kept().size());
  for (const auto& [id, kept] : leases.kept()) {
    std::vector<int64_t> indexes;
    std::vector<uint64_t> generations;
    for (const ReplayLeases::Prompt& prompt : resolved(data, id.first, kept.held)) {
      indexes.push_back(prompt.global_index);
      generations.push_back(prompt.generation);
    }
    const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(kept.expiry - now).count();
    MsgpackMapWriter map;
    map.set("partition").string(id.first);
    map.set("pass_id").unsigned_integer(id.second);
    map.set("step").string(replay_step_name(kept.step));
    map.set("global_steps").integer(kept.global_steps);
    map.set("batch_size").integer(kept.batch_size);
    map.set("remaining_ms").integer(std::clamp<int64_t>(remaining, 0, kMaxReplayLeaseMs));
    map.set("acknowledged").boolean(kept.acknowledged);
    map.set("held_indexes").numbers(std::span<const int64_t>(indexes));
    map.set("held_generations").numbers(std::span<const uint64_t>(generations));
    map.write(list);
  }
}

void read_replay_passes(const EncodedMap& checkpoint, const ControlData& data, ReplayLeases::Clock::time_point now,
                        ReplayLeases& leases) {
  if (!checkpoint.has(kPassesKey)) return;
  const std::vector<std::string_view> entries = checkpoint.elements(kPassesKey, "must be an array of kept passes");
  if (entries.size() > kMaxKeptReplayPasses + kMaxAcknowledgedReplayPasses) {
    checkpoint.fail(kPassesKey, "holds " + std::to_string(entries.size()) + " passes, more than a controller keeps");
  }
  size_t unacknowledged = 0;
  for (size_t e = 0; e < entries.size(); ++e) {
    const auto map = EncodedMap::skipping_unknown(entries[e], checkpoint.depth() + 2,
                                                  std::string(kPassesKey) + " " + std::to_string(e),
                                                  {"partition", "pass_id", "step", "global_steps", "batch_size",
                                                   "remaining_ms", "acknowledged", "held_indexes", "held_generations"});
    const std::string partition_id = map.text("partition");
    check_name(partition_id, std::string(kPassesKey) + " partition");
    const uint64_t pass_id = map.unsigned_integer("pass_id");
    if (pass_id == 0) map.fail("pass_id", "must be positive");
    if (leases.find(partition_id, pass_id) != nullptr) map.fail("pass_id", "names a pass kept before it");
    ReplayLeases::Kept kept;
    kept.step = parse_replay_step(map.text("step"));
    kept.global_steps = map.integer("global_steps");
    kept.batch_size = map.integer("batch_size");
    const int64_t remaining = map.integer("remaining_ms");
    if (remaining < 0 || remaining > kMaxReplayLeaseMs) {
      map.fail("remaining_ms", "= " + std::to_string(remaining) + " is outside [0, an hour]");
    }
    kept.expiry = now + std::chrono::milliseconds(remaining);
    kept.acknowledged = map.boolean("acknowledged");
    kept.restored = true;
    const auto indexes = map.numbers<int64_t>("held_indexes");
    const auto generations = map.numbers<uint64_t>("held_generations");
    if (generations.size() != indexes.size()) map.fail("held_generations", "must hold one per held index");
    if (!indexes.empty() && kept.acknowledged) map.fail("held_indexes", "must be empty for an acknowledged pass");
    std::vector<ReplayLeases::Prompt> held;
    for (size_t i = 0; i < indexes.size(); ++i) held.push_back({indexes[i], generations[i]});
    // Prompts cleared before the save (a build that wrote them anyway) are not held.
    kept.held = resolved(data, partition_id, held);
    if (!kept.acknowledged && ++unacknowledged > kMaxKeptReplayPasses) {
      map.fail("acknowledged", "is false for more passes than a controller keeps unacknowledged");
    }
    leases.restore(partition_id, pass_id, std::move(kept));
  }
}

}  // namespace seqflow::core
