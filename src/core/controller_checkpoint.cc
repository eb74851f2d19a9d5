// Controller::save / load: the controller's data and the sampler's state in
// one checksummed file, written atomically; a load builds everything aside
// and swaps it in only when all of it is valid.
#include <algorithm>

#include "common/encoded_map.h"
#include "common/msgpack_map_writer.h"
#include "common/msgpack_reader.h"
#include "core/control_data_codec.h"
#include "core/controller_checkpoint_format.h"
#include "core/controller_state.h"
#include "core/custom_meta.h"
#include "core/replay_checkpoint_codec.h"
#include "core/task_workloads_codec.h"
#include "seqflow/controller.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

constexpr const char* kFormat = "seqflow.controller";
// 2: generations, the generation counter and the incarnation. 3: each task's
// workload model ("task_workloads"). 4: write versions of overwritten fields
// and tags. Older ones still load (without task models before 3; every value
// its first write before 4). Policy versions are optional keys of any
// version (absent: 0, and samples started at 0, unfinished). "replay_groups"
// and "replay_passes" (the DAPO classification, the kept replay passes) are
// optional: left out when there is none, passed over by earlier builds.
constexpr int kVersion = 4;
constexpr int kOldestVersion = 1;
// A controller that comes back from a checkpoint cannot know how far its
// predecessor counted generations after the save; starting this far above
// keeps its new generations above every one handed out before.
constexpr uint64_t kGenerationJumpOnLoad = uint64_t{1} << 40;

}  // namespace

void Controller::save(const std::string& path) const {
  if (path.empty()) throw_invalid("checkpoint path must not be empty");
  std::lock_guard save_lock(state_->save_mutex);
  // The models have their own lock; reports may land between them and the data.
  const Value task_workloads = core::encode_task_workloads(state_->task_workloads.states());
  MsgpackMapWriter checkpoint;
  checkpoint.set("task_workloads").value(task_workloads);
  checkpoint.set("format").string(kFormat);
  checkpoint.set("version").integer(kVersion);
  {
    std::lock_guard lock(state_->mutex);
    core::write_control_data(checkpoint, state_->data, state_->leases);
    core::write_replay_groups(checkpoint, state_->data, state_->group_filters);
    core::write_replay_passes(checkpoint, state_->data, state_->replay_leases, core::ReplayLeases::Clock::now());
    MsgpackMapWriter sampler;
    sampler.set("name").string(state_->sampler->name());
    sampler.set("state").value(state_->sampler->state());
    sampler.write(checkpoint.set("sampler"));
  }
  const std::string payload = checkpoint.bytes();
  durable::FramedFileWriter file(path, core::kControllerCheckpoint);  // outside the lock: I/O is slow
  file.write(std::as_bytes(std::span(payload)));
  file.commit();
}

void Controller::load(const std::string& path) { load_checkpoint(path, false); }

void Controller::start_from(const std::string& path) { load_checkpoint(path, true); }

uint64_t Controller::incarnation() const {
  std::lock_guard lock(state_->mutex);
  return state_->data.incarnation();
}

void Controller::load_checkpoint(const std::string& path, bool take_incarnation) {
  if (path.empty()) throw_invalid("checkpoint path must not be empty");
  const durable::FramedFile file = durable::open_framed_file(path, core::kControllerCheckpoint);
  durable::check_checksum(file, path, core::kControllerCheckpoint);
  const std::string_view payload(reinterpret_cast<const char*>(file.bytes->data) + durable::kFrameHeaderSize,
                                 file.body_end - durable::kFrameHeaderSize);
  core::ControlData fresh;
  std::string sampler_name;
  Value sampler_state;
  core::TaskWorkloads::Models task_workloads;
  std::map<std::string, core::GroupFilterCache> group_filters;
  core::ReplayLeases replay_passes;
  try {
    check_msgpack_map(payload, kMaxDecodeNesting);
    // Keys this build does not read are passed over, as earlier builds did.
    const auto encoded =
        EncodedMap::skipping_unknown(payload, 0, "controller checkpoint",
                                     {"format", "version", "partitions", "next_generation", "incarnation", "sampler",
                                      "task_workloads", "policy_version", "replay_groups", "replay_passes"});
    if (encoded.text("format") != kFormat) throw_invalid("format is not " + std::string(kFormat));
    const int64_t version = encoded.integer("version");
    if (version < kOldestVersion || version > kVersion) {
      throw_invalid("version " + std::to_string(version) + " is not supported");
    }
    fresh = core::read_control_data(encoded);
    group_filters = core::read_replay_groups(encoded, fresh);
    core::read_replay_passes(encoded, fresh, core::ReplayLeases::Clock::now(), replay_passes);
    const auto sampler =
        EncodedMap::skipping_unknown(encoded.value("sampler"), 1, "controller checkpoint sampler", {"name", "state"});
    sampler_name = sampler.text("name");
    sampler_state = sampler.decoded("state");
    if (version >= 3) {
      task_workloads = state_->task_workloads.resume(core::decode_task_workloads(encoded.decoded("task_workloads")));
    }
  } catch (const Error& error) {
    throw Error(error.code(), "checkpoint '" + path + "': " + error.what());
  }

  {
    std::lock_guard lock(state_->mutex);
    Sampler& sampler = *state_->sampler;
    if (sampler_name != sampler.name()) {
      throw_invalid("checkpoint '" + path + "' holds the state of sampler '" + sampler_name +
                    "', but this controller runs '" + sampler.name() + "'");
    }
    // The sampler restores all or nothing; put its old state back if it throws.
    const Value previous = sampler.state();
    try {
      sampler.restore(sampler_state);
    } catch (const std::exception& error) {
      sampler.restore(previous);
      throw_invalid("checkpoint '" + path + "': sampler state: " + error.what());
    }
    const uint64_t counted = std::max(state_->data.indexes().next_generation(), fresh.indexes().next_generation());
    fresh.set_next_generation(counted + kGenerationJumpOnLoad);
    // Running on (not starting): the storage units hold this incarnation's data.
    if (!take_incarnation) fresh.set_incarnation(state_->data.incarnation());
    state_->data = std::move(fresh);
    state_->leases.clear();                            // the loaded consumption is the checkpoint's
    state_->change_logs.forget_all();                  // what was watched changed wholesale: watchers resync
    state_->replay_leases = std::move(replay_passes);  // their held prompts are named by the checkpoint's generations
    state_->replay_indexes.clear();
    state_->group_filters = std::move(group_filters);  // none when the checkpoint has none
    state_->notify_changed(nullptr);
  }
  // Outside the controller's lock: the replaced models' refit threads join here.
  state_->task_workloads.replace(std::move(task_workloads));
}

}  // namespace seqflow
