// Shared helpers of the controller and sampler tests: putting produced
// samples, building fetch requests, and checking errors by code and message.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <initializer_list>
#include <map>
#include <set>
#include <span>
#include <utility>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/controller_checkpoint_format.h"
#include "seqflow/controller.h"
#include "seqflow/error.h"

#include "msgpack_tree.h"
#include "test_support.h"

namespace seqflow::test {

inline std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

inline FieldSchema tensor_schema(Shape shape = {4}, DType dtype = DType::kFloat32) {
  FieldSchema schema;
  schema.dtype = dtype;
  schema.shape = std::move(shape);
  return schema;
}

inline std::map<std::string, FieldSchema> fields_of(std::initializer_list<std::string> names) {
  std::map<std::string, FieldSchema> out;
  for (const std::string& name : names) out.emplace(name, tensor_schema());
  return out;
}

// Inserts `count` samples (one put call) and marks `fields` produced, with
// the given custom_meta (empty, or one object per sample).
inline std::vector<int64_t> put(Controller& controller, const std::string& partition, int64_t count,
                                std::initializer_list<std::string> fields, const std::vector<Value>& meta = {}) {
  const BatchMeta inserted = controller.insert(partition, count);
  controller.mark_produced(partition, inserted.global_indexes, {}, fields_of(fields), meta);
  return inserted.global_indexes;
}

// total_lengths per sample, as custom_meta.
// A watch of `partition` from `cursor` (0: start), waiting up to `wait`.
inline WatchRequest watch_request(const std::string& partition, uint64_t cursor,
                                  std::chrono::milliseconds wait = std::chrono::milliseconds(0),
                                  WatchFilter filter = {}) {
  WatchRequest request;
  request.partition_id = partition;
  request.cursor = cursor;
  request.filter = std::move(filter);
  request.wait = wait;
  return request;
}

// A prompt key of partition "train" in verl's layout (the replay tests).
inline void replay_prompt(Controller& controller, const std::string& uid, const char* status, int64_t step) {
  controller.kv_resolve("train", std::vector<std::string>{uid},
                        std::vector<Value>{Value{{"is_prompt", true}, {"status", status}, {"global_steps", step}}});
}

// The keys of the partition, sorted.
inline std::set<std::string> listed_keys(const Controller& controller, const std::string& partition) {
  std::set<std::string> keys;
  for (const PartitionKeys& listed : controller.kv_list(&partition)) {
    for (size_t i = 0; i < listed.size(); ++i) keys.emplace(listed.key(i));
  }
  return keys;
}

// The keys of partition "train", where the replay tests keep their groups.
inline std::set<std::string> replay_keys(const Controller& controller) { return listed_keys(controller, "train"); }

// A replay lease long enough not to run out during a test.
inline constexpr int64_t kMinuteMs = 60000;

inline std::vector<Value> lengths_meta(const std::vector<int64_t>& lengths) {
  std::vector<Value> out;
  for (int64_t length : lengths) out.push_back({{"total_lengths", length}});
  return out;
}

inline MetaRequest fetch_request(const std::string& partition, const std::string& task, std::vector<std::string> fields,
                                 int64_t batch_size, int64_t dp_rank = 0, int64_t batch_index = 0) {
  MetaRequest request;
  request.fields = std::move(fields);
  request.batch_size = batch_size;
  request.partition_id = partition;
  request.mode = MetaMode::kFetch;
  request.task_name = task;
  request.sampling.dp_rank = dp_rank;
  request.sampling.batch_index = batch_index;
  request.polling = true;
  return request;
}

inline constexpr std::string_view kTempPathPrefix = "seqflow_controller_";

inline std::string temp_path_suffix() { return "_" + std::to_string(::getpid()); }

// A file name under the test temp dir, unique to this process.
inline std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + std::string(kTempPathPrefix) + name + temp_path_suffix();
}

// A temp_path() file and the ".tmp" beside it (SaveIsAtomic writes one),
// removed when this goes: also when a failed assertion or an exception ends
// the test early.
class TempFile {
 public:
  explicit TempFile(const std::string& name) : path_(temp_path(name)) {}
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
    std::filesystem::remove(path_ + ".tmp", ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Fails the run when a temp_path() file of this process (or its ".tmp")
// outlives the tests: they once left files in /tmp on every run.
class TempPathsRemovedCheck : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(::testing::TempDir(), ignored)) {
      std::string name = entry.path().filename().string();
      if (name.ends_with(".tmp")) name.resize(name.size() - 4);
      if (name.starts_with(kTempPathPrefix) && name.ends_with(temp_path_suffix())) {
        ADD_FAILURE() << "a test left " << entry.path() << " behind";
      }
    }
  }
};

// Registered by every test binary that can make temp_path() files.
inline ::testing::Environment* const kTempPathsRemovedCheck =
    ::testing::AddGlobalTestEnvironment(new TempPathsRemovedCheck);

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

using SampleFlags = std::vector<std::pair<int64_t, bool>>;

// Per sample of the partition (ascending): all of `fields` produced? Fails
// the test for a partition that does not exist.
inline SampleFlags produced_all(const ControlPlane& control, std::span<const std::string> fields,
                                const std::string& partition) {
  const auto status = control.production_status(fields, partition);
  EXPECT_TRUE(status.has_value()) << "partition '" << partition << "' does not exist";
  SampleFlags out;
  if (!status) return out;
  for (size_t i = 0; i < status->global_indexes.size(); ++i) {
    out.emplace_back(status->global_indexes[i], status->has_all(i));
  }
  return out;
}

// A kv_list entry's keys, in their order.
inline std::vector<std::string> keys_of(const PartitionKeys& listed) {
  std::vector<std::string> out;
  for (size_t i = 0; i < listed.size(); ++i) out.emplace_back(listed.key(i));
  return out;
}

inline size_t sample_count(const ControlPlane& control, const std::string& partition) {
  return produced_all(control, {}, partition).size();
}

// Per sample (ascending): consumed by the task? Fails the test for a
// partition that does not exist.
inline SampleFlags consumed(const ControlPlane& control, const std::string& task, const std::string& partition) {
  auto status = control.consumption_status(task, partition);
  EXPECT_TRUE(status.has_value()) << "partition '" << partition << "' does not exist";
  return status.value_or(SampleFlags{});
}

// The MessagePack inside a controller checkpoint file, and a file made of one.
inline std::string read_checkpoint_payload(const std::string& path) {
  const durable::FramedFile file = durable::open_framed_file(path, core::kControllerCheckpoint);
  const auto* body = reinterpret_cast<const char*>(file.bytes->data);
  return {body + durable::kFrameHeaderSize, body + file.body_end};
}

inline void write_checkpoint_payload(const std::string& path, std::string_view payload) {
  durable::FramedFileWriter file(path, core::kControllerCheckpoint);
  file.write(std::as_bytes(std::span(payload)));
  file.commit();
}

// Every observable bit of the controller, as its own checkpoint's bytes.
// The controller's state as its checkpoint holds it, without the generation
// counter and the incarnation: a load moves the one on (see
// Controller::load) and keeps the running controller's other.
inline std::string snapshot(const Controller& controller) {
  const TempFile checkpoint("snapshot");
  controller.save(checkpoint.path());
  Tree state = Tree::read(read_checkpoint_payload(checkpoint.path()));
  state.erase("next_generation");
  state.erase("incarnation");
  return state.bytes();
}

// Every part of two batch metas agrees (custom_meta sample by sample, to name the first that differs).
inline void expect_same_batch_meta(const BatchMeta& got, const BatchMeta& want) {
  EXPECT_EQ(got.global_indexes, want.global_indexes);
  EXPECT_EQ(got.generations, want.generations);
  EXPECT_EQ(got.partition_ids, want.partition_ids);
  EXPECT_EQ(got.field_schema, want.field_schema);
  EXPECT_EQ(got.production_status, want.production_status);
  EXPECT_EQ(got.custom_meta, want.custom_meta);
  for (size_t i = 0; i < std::min(got.custom_meta.size(), want.custom_meta.size()); ++i) {
    EXPECT_EQ(got.custom_meta[i], want.custom_meta[i]) << "sample " << i;
  }
  EXPECT_EQ(got.extra_info, want.extra_info);
}

inline void expect_same_meta_request(const MetaRequest& got, const MetaRequest& request) {
  EXPECT_EQ(got.fields, request.fields);
  EXPECT_EQ(got.batch_size, request.batch_size);
  EXPECT_EQ(got.partition_id, request.partition_id);
  EXPECT_EQ(got.mode, request.mode);
  EXPECT_EQ(got.task_name, request.task_name);
  EXPECT_EQ(got.sampling.dp_rank, request.sampling.dp_rank);
  EXPECT_EQ(got.sampling.batch_index, request.sampling.batch_index);
  EXPECT_EQ(got.sampling.dp_rank_given, request.sampling.dp_rank_given);
  EXPECT_EQ(got.sampling.extra, request.sampling.extra);
  EXPECT_EQ(got.polling, request.polling);
  EXPECT_EQ(got.timeout, request.timeout);
  EXPECT_EQ(got.lease, request.lease);
}

}  // namespace seqflow::test
