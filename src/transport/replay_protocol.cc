// The controller's replay_pass op (seqflow/replay.h): the request with its
// options and cursor as nested maps, the pass's answer back; and
// ack_replay_pass and reissue_inflight_prompts. A pass without a pass_id is written as before pass ids.
#include "transport/control_protocol.h"

#include "transport/wire_codec.h"

namespace seqflow::transport::control {

using wire::header_message;
using wire::reply_name;
using wire::request_name;

namespace {

const char* mode_name(ReplayMode mode) { return mode == ReplayMode::kSync ? "sync" : "async"; }
const char* strategy_name(StalenessStrategy strategy) { return strategy == StalenessStrategy::kDrop ? "drop" : "wait"; }

void write_options(MsgpackWriter& out, const ReplayOptions& options) {
  MsgpackMapWriter map;
  map.set("mode").string(mode_name(options.mode));
  if (options.max_off_policy_threshold) map.set("max_off_policy_threshold").integer(*options.max_off_policy_threshold);
  if (options.max_staleness_versions) map.set("max_staleness_versions").integer(*options.max_staleness_versions);
  map.set("strategy").string(strategy_name(options.strategy));
  if (options.group_filter_tag) map.set("group_filter_tag").string(*options.group_filter_tag);
  if (options.group_filter_metric) map.set("group_filter_metric").string(*options.group_filter_metric);
  map.set("evict").boolean(options.evict);
  map.set("refill_failed_groups").boolean(options.refill_failed_groups);
  map.set("max_inflight_prompts").integer(options.max_inflight_prompts);
  map.set("gen_batch_size").integer(options.gen_batch_size);
  if (options.balance_ranks != 0) {  // else written as before per-rank balance
    map.set("balance_ranks").integer(options.balance_ranks);
    map.set("balance_length_tag").string(options.balance_length_tag);
    map.set("balance_workload").string(options.balance_workload);
  }
  if (options.member_status) map.set("member_status").boolean(true);  // else written as before member statuses
  map.write(out);
}

ReplayOptions read_options(const EncodedMap& request) {
  const EncodedMap map =
      request.map("options", request.what() + " options",
                  {"mode", "max_off_policy_threshold", "max_staleness_versions", "strategy", "group_filter_tag",
                   "group_filter_metric", "evict", "refill_failed_groups", "max_inflight_prompts", "gen_batch_size",
                   "balance_ranks", "balance_length_tag", "balance_workload", "member_status"});
  ReplayOptions options;
  options.mode = parse_replay_mode(map.text("mode"));
  if (map.has("max_off_policy_threshold")) options.max_off_policy_threshold = map.integer("max_off_policy_threshold");
  if (map.has("max_staleness_versions")) options.max_staleness_versions = map.integer("max_staleness_versions");
  options.strategy = parse_staleness_strategy(map.text("strategy"));
  if (map.has("group_filter_tag")) options.group_filter_tag = map.text("group_filter_tag");
  if (map.has("group_filter_metric")) options.group_filter_metric = map.text("group_filter_metric");
  options.evict = map.boolean("evict");
  options.refill_failed_groups = map.boolean("refill_failed_groups");
  options.max_inflight_prompts = map.integer("max_inflight_prompts");
  options.gen_batch_size = map.integer("gen_batch_size");
  if (map.has("balance_ranks")) {
    options.balance_ranks = map.integer("balance_ranks");
    options.balance_length_tag = map.text("balance_length_tag");
    options.balance_workload = map.text("balance_workload");
  }
  if (map.has("member_status")) options.member_status = map.boolean("member_status");
  return options;
}

void write_cursor(MsgpackWriter& out, const ReplayCursor& cursor) {
  const ReplayEvictions& evictions = cursor.evictions;
  std::vector<double> values;
  std::vector<int64_t> groups;
  for (const auto& [value, count] : evictions.filtered_values) {
    values.push_back(value);
    groups.push_back(count);
  }
  MsgpackMapWriter map;
  map.set("refill_credit").integer(cursor.refill_credit);
  map.set("draining").boolean(cursor.draining);
  map.set("stale").integer(evictions.stale);
  map.set("stale_span_sum").integer(evictions.stale_span_sum);
  map.set("stale_span_max").integer(evictions.stale_span_max);
  map.set("stale_span_min").integer(evictions.stale_span_min);
  map.set("filtered").integer(evictions.filtered);
  map.set("filtered_values").numbers(std::span<const double>(values));
  map.set("filtered_groups").numbers(std::span<const int64_t>(groups));
  map.set("failed").integer(evictions.failed);
  map.set("surplus").integer(evictions.surplus);
  if (evictions.stale_versions != 0) {  // else written as before policy versions
    map.set("stale_versions").integer(evictions.stale_versions);
    map.set("stale_versions_age_max").integer(evictions.stale_versions_age_max);
  }
  if (evictions.left_out_members != 0) {  // else written as before member statuses
    map.set("left_out_members").integer(evictions.left_out_members);
  }
  map.write(out);
}

ReplayCursor read_cursor(const EncodedMap& message) {
  const EncodedMap map = message.map("cursor", message.what() + " cursor",
                                     {"refill_credit", "draining", "stale", "stale_span_sum", "stale_span_max",
                                      "stale_span_min", "filtered", "filtered_values", "filtered_groups", "failed",
                                      "surplus", "stale_versions", "stale_versions_age_max", "left_out_members"});
  ReplayCursor cursor;
  cursor.refill_credit = map.integer("refill_credit");
  cursor.draining = map.boolean("draining");
  ReplayEvictions& evictions = cursor.evictions;
  evictions.stale = map.integer("stale");
  evictions.stale_span_sum = map.integer("stale_span_sum");
  evictions.stale_span_max = map.integer("stale_span_max");
  evictions.stale_span_min = map.integer("stale_span_min");
  evictions.filtered = map.integer("filtered");
  const auto values = map.numbers<double>("filtered_values");
  const auto groups = map.numbers<int64_t>("filtered_groups");
  if (values.size() != groups.size()) map.fail("filtered_groups", "must hold one count per filtered value");
  for (size_t i = 0; i < values.size(); ++i) evictions.filtered_values.emplace_back(values[i], groups[i]);
  evictions.failed = map.integer("failed");
  evictions.surplus = map.integer("surplus");
  if (map.has("stale_versions")) {
    evictions.stale_versions = map.integer("stale_versions");
    evictions.stale_versions_age_max = map.integer("stale_versions_age_max");
  }
  if (map.has("left_out_members")) evictions.left_out_members = map.integer("left_out_members");
  return cursor;
}

// group_values as three flat arrays: the uids, each one's count of values, the values.
void write_group_values(MsgpackMapWriter& header,
                        const std::vector<std::pair<std::string, std::vector<double>>>& group_values) {
  std::vector<std::string> uids;
  std::vector<int64_t> counts;
  std::vector<double> values;
  for (const auto& [uid, group] : group_values) {
    uids.push_back(uid);
    counts.push_back(static_cast<int64_t>(group.size()));
    values.insert(values.end(), group.begin(), group.end());
  }
  header.set("group_value_uids").strings(uids);
  header.set("group_value_counts").numbers(std::span<const int64_t>(counts));
  header.set("group_values").numbers(std::span<const double>(values));
}

std::vector<std::pair<std::string, std::vector<double>>> read_group_values(const EncodedMap& header) {
  const bool any = header.has("group_value_uids") || header.has("group_value_counts") || header.has("group_values");
  if (!any) return {};
  const std::vector<std::string> uids = header.texts("group_value_uids");
  const auto counts = header.numbers<int64_t>("group_value_counts");
  const auto values = header.numbers<double>("group_values");
  if (counts.size() != uids.size()) {
    header.fail("group_value_counts", "must hold one count per uid: " + std::to_string(counts.size()) + " counts for " +
                                          std::to_string(uids.size()) + " uids");
  }
  std::vector<std::pair<std::string, std::vector<double>>> groups;
  size_t next = 0;
  for (size_t i = 0; i < uids.size(); ++i) {
    if (counts[i] < 0 || static_cast<uint64_t>(counts[i]) > values.size() - next) {
      header.fail("group_value_counts", "counts " + std::to_string(counts[i]) + " values for uid '" + uids[i] +
                                            "', where " + std::to_string(values.size() - next) + " are left");
    }
    const auto end = next + static_cast<size_t>(counts[i]);
    groups.emplace_back(uids[i], std::vector<double>(values.begin() + static_cast<ptrdiff_t>(next),
                                                     values.begin() + static_cast<ptrdiff_t>(end)));
    next = end;
  }
  if (next != values.size()) {
    header.fail("group_values",
                "holds " + std::to_string(values.size()) + " values, the counts " + std::to_string(next));
  }
  return groups;
}

}  // namespace

Frames encode_replay_pass_request(const ReplayRequest& request) {
  MsgpackMapWriter header;
  header.set("partition_id").string(request.partition_id);
  header.set("global_steps").integer(request.global_steps);
  header.set("batch_size").integer(request.batch_size);
  header.set("step").string(replay_step_name(request.step));
  write_options(header.set("options"), request.options);
  write_cursor(header.set("cursor"), request.cursor);
  header.set("wait_ms").integer(request.wait_ms);
  if (!request.group_values.empty()) write_group_values(header, request.group_values);
  if (request.pass_id != 0) {
    header.set("pass_id").unsigned_integer(request.pass_id);
    header.set("lease_ms").integer(request.lease_ms);
  }
  return header_message(header);
}

ReplayRequest decode_replay_pass_request(const Frames& request) {
  const EncodedMap header =
      wire::read_header(request, 0, request_name(kReplayPass),
                        {"partition_id", "global_steps", "batch_size", "step", "options", "cursor", "wait_ms",
                         "group_value_uids", "group_value_counts", "group_values", "pass_id", "lease_ms"});
  ReplayRequest decoded;
  decoded.partition_id = header.text("partition_id");
  decoded.global_steps = header.integer("global_steps");
  decoded.batch_size = header.integer("batch_size");
  decoded.step = parse_replay_step(header.text("step"));
  decoded.options = read_options(header);
  decoded.cursor = read_cursor(header);
  decoded.wait_ms = header.integer("wait_ms");
  decoded.group_values = read_group_values(header);
  if (header.has("pass_id")) {
    decoded.pass_id = header.unsigned_integer("pass_id");
    if (decoded.pass_id == 0) header.fail("pass_id", "must be positive (leave it out for no pass id)");
    decoded.lease_ms = header.integer("lease_ms");
  }
  return decoded;
}

Frames encode_replay_pass_reply(const ReplayPass& pass) {
  MsgpackMapWriter header;
  header.set("refill").integer(pass.refill);
  header.set("ready").boolean(pass.ready);
  header.set("sampleable").integer(pass.sampleable);
  header.set("sampleable_uids").strings(pass.sampleable_uids);
  header.set("selected_uids").strings(pass.selected_uids);
  header.set("keys").strings(pass.keys);
  wire::write_objects(header.set("tags"), pass.tags);
  write_cursor(header.set("cursor"), pass.cursor);
  header.set("released").numbers(std::span<const int64_t>(pass.released));
  if (!pass.unclassified_keys.empty()) header.set("unclassified_keys").strings(pass.unclassified_keys);
  if (pass.kept) header.set("kept").boolean(true);
  if (!pass.rank_sizes.empty()) {
    header.set("rank_sizes").numbers(std::span<const int64_t>(pass.rank_sizes));
    header.set("rank_lengths").numbers(std::span<const int64_t>(pass.rank_lengths));
    header.set("arrival_rank_lengths").numbers(std::span<const int64_t>(pass.arrival_rank_lengths));
  }
  return header_message(header);
}

ReplayPass decode_replay_pass_reply(const Frames& reply) {
  const EncodedMap header = wire::read_header(
      reply, 0, reply_name(kReplayPass),
      {"refill", "ready", "sampleable", "sampleable_uids", "selected_uids", "keys", "tags", "cursor", "released",
       "unclassified_keys", "kept", "rank_sizes", "rank_lengths", "arrival_rank_lengths"});
  ReplayPass pass;
  pass.refill = header.integer("refill");
  pass.ready = header.boolean("ready");
  pass.sampleable = header.integer("sampleable");
  pass.sampleable_uids = header.texts("sampleable_uids");
  pass.selected_uids = header.texts("selected_uids");
  pass.keys = header.texts("keys");
  pass.tags = header.objects("tags");
  if (pass.tags.size() != pass.keys.size()) header.fail("tags", "must hold one tag per key");
  pass.cursor = read_cursor(header);
  pass.released = header.numbers<int64_t>("released");
  if (header.has("unclassified_keys")) pass.unclassified_keys = header.texts("unclassified_keys");
  pass.kept = header.has("kept") && header.boolean("kept");
  if (header.has("rank_sizes")) {
    pass.rank_sizes = header.numbers<int64_t>("rank_sizes");
    pass.rank_lengths = header.numbers<int64_t>("rank_lengths");
    pass.arrival_rank_lengths = header.numbers<int64_t>("arrival_rank_lengths");
    int64_t placed = 0;
    for (int64_t size : pass.rank_sizes) {
      if (size < 0 || size > static_cast<int64_t>(pass.keys.size()) - placed) {
        header.fail("rank_sizes", "must count the keys, rank by rank");
      }
      placed += size;
    }
    if (placed != static_cast<int64_t>(pass.keys.size()))
      header.fail("rank_sizes", "must count the keys, rank by rank");
    if (pass.rank_lengths.size() != pass.rank_sizes.size() ||
        pass.arrival_rank_lengths.size() != pass.rank_sizes.size()) {
      header.fail("rank_lengths", "and arrival_rank_lengths must hold one sum per rank");
    }
  }
  return pass;
}

Frames encode_ack_replay_pass_request(const AckReplayPassRequest& request) {
  MsgpackMapWriter header;
  header.set("partition_id").string(request.partition_id);
  header.set("pass_id").unsigned_integer(request.pass_id);
  return header_message(header);
}

AckReplayPassRequest decode_ack_replay_pass_request(const Frames& request) {
  const EncodedMap header = wire::read_header(request, 0, request_name(kAckReplayPass), {"partition_id", "pass_id"});
  return {header.text("partition_id"), header.unsigned_integer("pass_id")};
}

Frames encode_ack_replay_pass_reply(const ReplayAck& ack) {
  MsgpackMapWriter header;
  header.set("acknowledged").boolean(ack.acknowledged);
  header.set("released").numbers(std::span<const int64_t>(ack.released));
  return header_message(header);
}

ReplayAck decode_ack_replay_pass_reply(const Frames& reply) {
  const EncodedMap header = wire::read_header(reply, 0, reply_name(kAckReplayPass), {"acknowledged", "released"});
  return {header.boolean("acknowledged"), header.numbers<int64_t>("released")};
}

Frames encode_reissue_request(const ReissueRequest& request) {
  MsgpackMapWriter header;
  header.set("partition_id").string(request.partition_id);
  header.set("global_steps").integer(request.global_steps);
  if (request.member_status) header.set("member_status").boolean(true);
  return header_message(header);
}

ReissueRequest decode_reissue_request(const Frames& request) {
  const EncodedMap header = wire::read_header(request, 0, request_name(kReissueInflightPrompts),
                                              {"partition_id", "global_steps", "member_status"});
  return {header.text("partition_id"), header.integer("global_steps"),
          header.has("member_status") && header.boolean("member_status")};
}

Frames encode_reissue_reply(const ReissuedPrompts& reissued) {
  MsgpackMapWriter header;
  header.set("keys").strings(reissued.keys);
  header.set("released").numbers(std::span<const int64_t>(reissued.released));
  return header_message(header);
}

ReissuedPrompts decode_reissue_reply(const Frames& reply) {
  const EncodedMap header = wire::read_header(reply, 0, reply_name(kReissueInflightPrompts), {"keys", "released"});
  ReissuedPrompts reissued;
  reissued.keys = header.texts("keys");
  reissued.released = header.numbers<int64_t>("released");
  reissued.cleared_trajectories = static_cast<int64_t>(reissued.released.size());
  return reissued;
}

}  // namespace seqflow::transport::control
