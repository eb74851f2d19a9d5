// The controller's measured workload per task: report_timing, its fit,
// over the wire, in metrics and in checkpoints.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include "client_test_support.h"
#include "common/msgpack_reader.h"
#include "controller_test_support.h"
#include "core/controller_checkpoint_format.h"
#include "remote_cluster.h"
#include "seqflow/calibration.h"
#include "seqflow/client.h"
#include "seqflow/controller.h"
#include "storage_test_support.h"
#include "transport/timing_codec.h"
#include "wire_test_support.h"

namespace seqflow::test {
namespace {

// Attention-heavy hardware: the L^2 term dominates long sequences.
constexpr SecondsCoefficients kTruth{2e-6, 4e-9, 1e-4, 5e-4};

double seconds_of(const std::vector<int64_t>& lengths) {
  double total = kTruth.per_micro_batch;
  for (int64_t length : lengths) {
    const double l = static_cast<double>(length);
    total += kTruth.per_token * l + kTruth.per_token_squared * l * l + kTruth.per_sequence;
  }
  return total;
}

// A kernel vectorised over 8 positions: kTruth plus kUnaligned seconds per
// token squared of every length that is not a multiple of 8.
constexpr double kUnaligned = 1e-9;

double unaligned_seconds_of(const std::vector<int64_t>& lengths) {
  double total = seconds_of(lengths);
  for (int64_t length : lengths) {
    if (length % 8 != 0) total += kUnaligned * static_cast<double>(length) * static_cast<double>(length);
  }
  return total;
}

using Truth = double (*)(const std::vector<int64_t>&);

// Micro-batches of 1-4 sequences of 50..4000 tokens (about half of them a
// multiple of 8), timed by `truth`.
std::vector<TimingRecord> measured(int64_t count, Truth truth = seconds_of) {
  Rng rng(kSeed);
  std::uniform_int_distribution<int64_t> sequences(1, 4), length(50, 4000), coin(0, 1);
  std::vector<TimingRecord> records;
  for (int64_t i = 0; i < count; ++i) {
    TimingRecord record;
    for (int64_t s = sequences(rng); s > 0; --s) {
      const int64_t drawn = length(rng);
      record.lengths.push_back(coin(rng) == 1 ? drawn - drawn % 8 : drawn);
    }
    record.seconds = truth(record.lengths);
    records.push_back(std::move(record));
  }
  return records;
}

// The fit runs in the background: waits (bounded) until the task's model
// covers `reports` records timed by `truth` and is fitted.
TaskWorkload fitted_model(const ControlPlane& control, const std::string& task, int64_t reports,
                          Truth truth = seconds_of) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    std::optional<TaskWorkload> model = control.task_workload(task);
    // The fit of every report: a fit of the first few is already accurate here, and a refit of
    // all of them may still be on its way (a checkpoint saved then holds the later one).
    if (model && model->reports == reports && model->fitted && model->workload.fit().records == reports &&
        std::abs(model->workload.seconds({{1001}}) - truth({1001})) < 1e-3 * truth({1001})) {
      return *model;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "task " << task << " has no fit of " << reports << " reports after 30 s";
      return model.value_or(TaskWorkload{});
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void expect_recovers_truth(const TaskWorkload& model, Truth truth = seconds_of) {
  EXPECT_TRUE(model.fitted);
  for (const auto& lengths : std::vector<std::vector<int64_t>>{{100}, {4000}, {3999}, {300, 2001, 50}}) {
    EXPECT_NEAR(model.workload.seconds(lengths), truth(lengths), 1e-3 * truth(lengths));
  }
  EXPECT_LT(model.workload.fit().median_error, 1e-3);
}

// A model fitted with an alignment of 8 to timings of unaligned_seconds_of.
void expect_recovers_unaligned_truth(const TaskWorkload& model) {
  expect_recovers_truth(model, unaligned_seconds_of);
  EXPECT_EQ(model.workload.coefficients().alignment, 8);
  EXPECT_NEAR(model.workload.coefficients().per_unaligned_token_squared, kUnaligned, 1e-3 * kUnaligned);
}

TEST(ControllerTaskWorkload, FitsEachTasksTimingsApart) {
  Controller controller;
  EXPECT_FALSE(controller.task_workload("update_actor").has_value());
  const auto records = measured(64);
  controller.report_timing("update_actor", std::span(records).first(10));
  const auto early = controller.task_workload("update_actor");
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->reports, 10);
  EXPECT_FALSE(early->fitted);  // fewer than the fit needs: still the tokens prior
  EXPECT_TRUE(early->workload.is_tokens());
  controller.report_timing("update_actor", std::span(records).subspan(10));
  const TaskWorkload model = fitted_model(controller, "update_actor", 64);
  expect_recovers_truth(model);
  EXPECT_EQ(model.workload.coefficients().alignment, 1);  // no term for unaligned lengths unless asked
  EXPECT_FALSE(controller.task_workload("log_prob").has_value());
  ASSERT_EQ(controller.task_workloads().size(), 1u);
  EXPECT_EQ(controller.task_workloads()[0].task_name, "update_actor");
}

TEST(ControllerTaskWorkload, ATimingAlignmentFitsWhatUnalignedLengthsCostMore) {
  ControllerOptions options;
  options.timing_alignment = 8;
  Controller controller(options);
  controller.report_timing("update_actor", measured(64, unaligned_seconds_of));
  expect_recovers_unaligned_truth(fitted_model(controller, "update_actor", 64, unaligned_seconds_of));
  // Timings without that cost leave the term at zero.
  controller.report_timing("log_prob", measured(64));
  const TaskWorkload plain = fitted_model(controller, "log_prob", 64);
  expect_recovers_truth(plain);
  EXPECT_EQ(plain.workload.coefficients().per_unaligned_token_squared, 0);
}

TEST(ControllerTaskWorkload, ATimingAlignmentBelowOneIsRefusedByName) {
  for (const int64_t alignment : {0, -8}) {
    ControllerOptions options;
    options.timing_alignment = alignment;
    EXPECT_TRUE(throws_invalid([&] { Controller controller(options); },
                               {"timing_alignment = " + std::to_string(alignment), ">= 1"}));
    EXPECT_TRUE(throws_invalid([&] { make_embedded_client(options, {}); }, {"timing_alignment"}));
  }
}

TEST(ControllerTaskWorkload, RefusesABadRecordAndTakesNoneOfTheReport) {
  Controller controller;
  auto records = measured(3);
  records[1].seconds = -1;
  EXPECT_TRUE(throws_invalid([&] { controller.report_timing("actor", records); }, {"records[1].", "seconds"}));
  records[1].seconds = 1;
  records[2].lengths = {};
  EXPECT_TRUE(throws_invalid([&] { controller.report_timing("actor", records); }, {"records[2].", "lengths"}));
  records[2].lengths = {5, -3};
  EXPECT_TRUE(throws_invalid([&] { controller.report_timing("actor", records); }, {"records[2].lengths[1]", "-3"}));
  EXPECT_TRUE(throws_invalid([&] { controller.report_timing("", measured(1)); }, {"task_name"}));
  EXPECT_FALSE(controller.task_workload("actor").has_value());
}

// Truth seconds of each rank's share of `lengths` after a fetch of the two
// ranks' batches from a seqlen_balanced sampler (one sample per group).
std::vector<double> rank_seconds(Controller& controller, const std::string& partition,
                                 const std::vector<int64_t>& lengths) {
  const auto indexes = put(controller, partition, static_cast<int64_t>(lengths.size()), {"x"}, lengths_meta(lengths));
  std::vector<double> out;
  for (int64_t rank = 0; rank < 2; ++rank) {
    const BatchMeta batch = controller.get_meta(fetch_request(partition, "actor", {"x"}, 3, rank));
    double seconds = 0;
    for (int64_t index : batch.global_indexes) {
      const auto at = std::find(indexes.begin(), indexes.end(), index) - indexes.begin();
      seconds += seconds_of({lengths[at]}) - kTruth.per_micro_batch;
    }
    out.push_back(seconds);
  }
  return out;
}

TEST(OnlineWorkloadKind, CostsAsTokensAndTravelsByName) {
  const Workload online = Workload::parse("online");
  EXPECT_EQ(online, Workload::online());
  EXPECT_EQ(online.name(), "online");
  EXPECT_EQ(online.costs(std::vector<int64_t>{3, 500}), Workload::tokens().costs(std::vector<int64_t>{3, 500}));
  EXPECT_EQ(Workload::from_json(online.to_json()), online);
  EXPECT_TRUE(throws_invalid([&] { online.seconds(std::vector<int64_t>{3}); }, {"online"}));
}

TEST(ControllerTaskWorkload, AnOnlineSamplerBalancesTheTasksFit) {
  ControllerOptions options;
  options.sampler = make_seqlen_balanced_sampler(1, 2, "auto", -1, Workload::online());
  Controller controller(options);
  const std::vector<int64_t> lengths = {1000, 700, 600, 500, 400, 200};
  // The best split of the measured seconds, by brute force over 3 + 3.
  double best = 1e9;
  for (int mask = 0; mask < 64; ++mask) {
    if (std::popcount(static_cast<unsigned>(mask)) != 3) continue;
    double parts[2] = {0, 0};
    for (size_t i = 0; i < lengths.size(); ++i)
      parts[(mask >> i) & 1] += seconds_of({lengths[i]}) - kTruth.per_micro_batch;
    best = std::min(best, std::max(parts[0], parts[1]));
  }
  // Before any timing the sampler balances tokens, which is not the best split of the seconds here ...
  const auto by_tokens = rank_seconds(controller, "before", lengths);
  ASSERT_GT(std::max(by_tokens[0], by_tokens[1]), best * 1.01);
  // ... and once the task's fit exists, it balances the seconds.
  const auto records = measured(64);
  controller.report_timing("actor", records);
  fitted_model(controller, "actor", 64);
  const auto by_fit = rank_seconds(controller, "after", lengths);
  EXPECT_NEAR(std::max(by_fit[0], by_fit[1]), best, 1e-9);
}

TEST(WireTimingCodec, RecordsTravelWholeAndInconsistentCountsAreRefused) {
  const auto records = measured(5);
  const test::Tree request = test::tree_of(transport::wire::timing_request("actor", records));
  const test::TreeHeader header(request, "report_timing request", {"task_name", "lengths", "counts", "seconds"});
  const auto decoded = transport::wire::read_timing_records(header);
  ASSERT_EQ(decoded.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(decoded[i].lengths, records[i].lengths);
    EXPECT_EQ(decoded[i].seconds, records[i].seconds);
  }
  for (const std::vector<int64_t>& counts :
       std::vector<std::vector<int64_t>>{{1, 1, 1, 1, 100}, {0, 0, 0, 0, 0}, {-1, 1, 1, 1, 1}, {1, 1}}) {
    test::Tree forged = request;
    forged["counts"] = test::Tree::numbers(counts);
    const test::TreeHeader bad(forged, "report_timing request", {"task_name", "lengths", "counts", "seconds"});
    EXPECT_TRUE(throws_invalid([&] { transport::wire::read_timing_records(bad); }, {"counts"}));
  }
}

TEST(RemoteTaskWorkload, ReportsReachTheControllerAndItsMetrics) {
  RemoteCluster cluster(1);
  auto client = cluster.client();
  EXPECT_FALSE(client->control().task_workload("update_actor").has_value());
  const auto records = measured(64);
  client->control().report_timing("update_actor", records);
  const TaskWorkload model = fitted_model(client->control(), "update_actor", 64);
  expect_recovers_truth(model);
  EXPECT_EQ(model.task_name, "update_actor");
  const std::string metrics = cluster.controller().metrics().render();
  EXPECT_NE(metrics.find("seqflow_task_workload_reports_total{task=\"update_actor\"} 64"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("seqflow_task_workload_seconds{task=\"update_actor\",term=\"per_token_squared\"}"),
            std::string::npos);
  EXPECT_NE(metrics.find("seqflow_task_workload_prediction_error{task=\"update_actor\",quantile=\"0.9\"}"),
            std::string::npos);
  EXPECT_NE(metrics.find("seqflow_task_workload_alignment{task=\"update_actor\"} 1\n"), std::string::npos);
  EXPECT_EQ(metrics.find("term=\"per_unaligned_token_squared\""), std::string::npos);  // none without an alignment
  auto bad = records;
  bad[0].seconds = std::nan("");
  EXPECT_TRUE(throws_invalid([&] { client->control().report_timing("update_actor", bad); }, {"records[0]."}));
  EXPECT_EQ(client->control().task_workload("update_actor")->reports, 64);
}

TEST(RemoteTaskWorkload, AControllerServiceWithATimingAlignmentFitsAndPublishesTheTerm) {
  server::ControllerServiceOptions options;
  options.controller.timing_alignment = 8;
  RemoteCluster cluster(1, {}, options);
  auto client = cluster.client();
  client->control().report_timing("update_actor", measured(64, unaligned_seconds_of));
  const TaskWorkload model = fitted_model(client->control(), "update_actor", 64, unaligned_seconds_of);
  expect_recovers_unaligned_truth(model);
  const std::string metrics = cluster.controller().metrics().render();
  EXPECT_NE(metrics.find("seqflow_task_workload_seconds{task=\"update_actor\",term=\"per_unaligned_token_squared\"}"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("seqflow_task_workload_alignment{task=\"update_actor\"} 8\n"), std::string::npos) << metrics;
}

void expect_same_model(const std::optional<TaskWorkload>& actual, const std::optional<TaskWorkload>& expected) {
  ASSERT_EQ(actual.has_value(), expected.has_value());
  if (!expected) return;
  EXPECT_EQ(actual->task_name, expected->task_name);
  EXPECT_EQ(actual->workload.to_json(), expected->workload.to_json());  // kind, coefficients and fit report
  EXPECT_EQ(actual->reports, expected->reports);
  EXPECT_EQ(actual->fitted, expected->fitted);
}

class TaskWorkloadCheckpoint : public ClientModes {};
INSTANTIATE_TEST_SUITE_P(Modes, TaskWorkloadCheckpoint, ::testing::ValuesIn(kClientModes), mode_name);

TEST_P(TaskWorkloadCheckpoint, ALoadedCheckpointAnswersWithEachTasksSavedModel) {
  TempDir dir;
  const std::string path = dir.file("ckpt");
  const auto records = measured(64);
  auto client = make_client();
  client->control().report_timing("update_actor", records);
  client->control().report_timing("log_prob", std::span(records).first(10));
  const TaskWorkload fitted = fitted_model(client->control(), "update_actor", 64);
  client->save_checkpoint(path, Value::object());

  auto restored = make_client();
  restored->control().report_timing("other", std::span(records).first(3));  // replaced by the load
  restored->load_checkpoint(path);
  expect_same_model(restored->control().task_workload("update_actor"), fitted);
  expect_same_model(restored->control().task_workload("log_prob"), client->control().task_workload("log_prob"));
  EXPECT_FALSE(restored->control().task_workload("other").has_value());
  // The unfitted model goes on from its 10 records: 6 more make its first fit.
  restored->control().report_timing("log_prob", std::span(records).subspan(10, 6));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!restored->control().task_workload("log_prob")->fitted && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(restored->control().task_workload("log_prob")->fitted);
  EXPECT_EQ(restored->control().task_workload("log_prob")->reports, 16);
}

// The alignment is the controller's setting, not the checkpoint's: a model
// saved by a controller without one learns on with the loading one's.
TEST(TaskWorkloadCheckpointFile, ALoadedModelLearnsOnWithTheLoadingControllersAlignment) {
  TempDir dir;
  const std::string path = dir.file("ckpt");
  const auto records = measured(64, unaligned_seconds_of);
  auto saving = make_embedded_client(ControllerOptions{}, {});
  saving->control().report_timing("update_actor", std::span(records).first(10));
  saving->save_checkpoint(path, Value::object());

  ControllerOptions aligned;
  aligned.timing_alignment = 8;
  auto loading = make_embedded_client(aligned, {});
  loading->load_checkpoint(path);
  EXPECT_EQ(loading->control().task_workload("update_actor")->reports, 10);
  loading->control().report_timing("update_actor", std::span(records).subspan(10));
  expect_recovers_unaligned_truth(fitted_model(loading->control(), "update_actor", 64, unaligned_seconds_of));
}

// Checkpoints saved before controllers kept task models (tests/data/checkpoints/README.md).
TEST(TaskWorkloadCheckpointFile, ACheckpointFromBeforeTaskModelsLoadsWithoutThem) {
  const std::string data = SEQFLOW_TEST_DATA_DIR "/checkpoints/";
  auto embedded = make_embedded_client(ControllerOptions{}, {});
  RemoteCluster cluster(2);
  auto remote = cluster.client();
  // The services read checkpoints only under their root (the temp directory).
  const TempDir copies;
  std::filesystem::copy(data + "before_task_models_remote", copies.file("before_task_models_remote"),
                        std::filesystem::copy_options::recursive);
  for (auto& [client, directory] : {std::pair{embedded, data + "before_task_models_embedded"},
                                    std::pair{remote, copies.file("before_task_models_remote")}}) {
    SCOPED_TRACE(directory);
    client->control().report_timing("actor", measured(2));
    client->load_checkpoint(directory);
    EXPECT_FALSE(client->control().task_workload("actor").has_value());
    const BatchMeta batch = client->get_meta(fetch_request("train", "reader", {"x"}, 3));
    ASSERT_EQ(batch.size(), 3u);
    const std::string fields[] = {"x"};
    const auto rows = client->get_data(batch, fields);
    int64_t sum = 0;
    for (const auto& row : rows) {
      ASSERT_EQ(row[0].dtype, DType::kInt64);
      const auto bytes = row[0].bytes();
      for (size_t at = 0; at < bytes.size(); at += sizeof(int64_t)) {
        int64_t value = 0;
        std::memcpy(&value, bytes.data() + at, sizeof value);
        sum += value;
      }
    }
    EXPECT_EQ(sum, 0 + 1 + 2 + 3 + 4 + 5);
  }
}

// The controller checkpoint at `path` with its decoded payload changed by `change`.
template <typename Change>
void rewrite_controller_checkpoint(const std::string& path, Change change) {
  const durable::FramedFile file = durable::open_framed_file(path, core::kControllerCheckpoint);
  const std::string_view payload(reinterpret_cast<const char*>(file.bytes->data) + durable::kFrameHeaderSize,
                                 file.body_end - durable::kFrameHeaderSize);
  test::Tree encoded = test::Tree::read(payload);
  change(encoded);
  const std::string bytes = encoded.bytes();
  durable::FramedFileWriter writer(path, core::kControllerCheckpoint);
  writer.write(std::as_bytes(std::span(bytes)));
  writer.commit();
}

TEST(TaskWorkloadCheckpointFile, ABadTaskModelInACheckpointIsNamedAndChangesNothing) {
  const TempFile checkpoint("bad_task_model");
  Controller saved;
  saved.report_timing("update_actor", measured(20));
  saved.save(checkpoint.path());
  Controller running;
  running.report_timing("other", measured(3));
  put(running, "kept", 2, {"x"});
  const auto refused = [&](auto change, std::initializer_list<std::string_view> fragments) {
    TempDir dir;
    const std::string copy = dir.file("controller.ckpt");
    std::filesystem::copy_file(checkpoint.path(), copy);
    rewrite_controller_checkpoint(copy, change);
    return throws_invalid([&] { running.load(copy); }, fragments);
  };
  EXPECT_TRUE(refused([](auto& e) { e["task_workloads"]["update_actor"]["refitted"] = 21; },
                      {"task 'update_actor'", "refitted = 21"}));
  EXPECT_TRUE(refused([](auto& e) { e["task_workloads"]["update_actor"]["seconds"][4] = -1.0; },
                      {"task 'update_actor'", "window[4].seconds"}));
  EXPECT_TRUE(refused([](auto& e) { e["task_workloads"]["update_actor"]["seconds"].erase(0); },
                      {"task 'update_actor'", "'lengths' and 'seconds'"}));
  EXPECT_TRUE(refused([](auto& e) { e["task_workloads"]["update_actor"]["workload"]["kind"] = "cubic"; },
                      {"task 'update_actor'", "cubic"}));
  EXPECT_TRUE(refused([](auto& e) { e["task_workloads"] = test::Tree::array(); }, {"task_workloads"}));
  EXPECT_TRUE(refused([](auto& e) { e["task_workloads"]["update_actor"].erase("reports"); }, {"corrupt", "reports"}));
  EXPECT_TRUE(refused([](auto& e) { e.erase("task_workloads"); }, {"lacks the field 'task_workloads'"}));
  EXPECT_EQ(running.task_workload("other")->reports, 3);
  EXPECT_FALSE(running.task_workload("update_actor").has_value());
  ASSERT_EQ(running.progress().size(), 1u);
  EXPECT_EQ(running.progress()[0].partition_id, "kept");
  // The checkpoint as saved loads.
  running.load(checkpoint.path());
  EXPECT_EQ(running.task_workload("update_actor")->reports, 20);
  EXPECT_FALSE(running.task_workload("other").has_value());
}

}  // namespace
}  // namespace seqflow::test
