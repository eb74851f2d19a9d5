// Controller::save / load: the controller's data and the sampler's state in
// one checksummed file, written atomically; a load builds everything aside
// and swaps it in only when all of it is valid.
#include <algorithm>

#include "common/msgpack_reader.h"
#include "common/value_json.h"
#include "core/control_data_codec.h"
#include "core/controller_checkpoint_format.h"
#include "core/controller_state.h"
#include "core/custom_meta.h"
#include "core/task_workloads_codec.h"
#include "seqflow/controller.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

constexpr const char* kFormat = "seqflow.controller";
// 2: generations, the generation counter and the incarnation. 3: each task's
// workload model ("task_workloads"). 4: write versions of overwritten fields
// and tags. Older ones still load (without task models before 3; every value
// its first write before 4).
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
  std::vector<uint8_t> payload;
  // The models have their own lock; reports may land between them and the data.
  nlohmann::json task_workloads = to_json(core::encode_task_workloads(state_->task_workloads.states()));
  {
    std::lock_guard lock(state_->mutex);
    nlohmann::json encoded = core::encode_control_data(state_->data);
    encoded["task_workloads"] = std::move(task_workloads);
    encoded["format"] = kFormat;
    encoded["version"] = kVersion;
    encoded["sampler"] = {{"name", state_->sampler->name()}, {"state", to_json(state_->sampler->state())}};
    payload = nlohmann::json::to_msgpack(encoded);
  }
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
  nlohmann::json encoded;
  core::ControlData fresh;
  std::string sampler_name;
  Value sampler_state;
  core::TaskWorkloads::Models task_workloads;
  try {
    encoded = msgpack_to_json(payload, kMaxDecodeNesting);
    if (encoded.at("format").get<std::string>() != kFormat) {
      throw_invalid("format is not " + std::string(kFormat));
    }
    const int version = encoded.at("version").get<int>();
    if (version < kOldestVersion || version > kVersion) {
      throw_invalid("version " + encoded.at("version").dump() + " is not supported");
    }
    fresh = core::decode_control_data(encoded);
    sampler_name = encoded.at("sampler").at("name").get<std::string>();
    sampler_state = from_json(encoded.at("sampler").at("state"));
    if (version >= 3) {
      task_workloads =
          state_->task_workloads.resume(core::decode_task_workloads(from_json(encoded.at("task_workloads"))));
    }
  } catch (const nlohmann::json::exception& error) {
    throw_invalid("checkpoint '" + path + "' is corrupt: " + error.what());
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
    state_->notify_changed(nullptr);
  }
  // Outside the controller's lock: the replaced models' refit threads join here.
  state_->task_workloads.replace(std::move(task_workloads));
}

}  // namespace seqflow
