// Write versions over the wire: a storage service stages a versioned put,
// serves it only to gets that name its version, and makes it the value
// every reader sees on "commit"; bad versions get errors naming them.
// ShardedStorage does the same across units, each asked for its samples,
// by TCP or by same-host copy.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "client/call_deadline.h"
#include "client/sharded_storage.h"
#include "local_copy_test_support.h"
#include "server/storage_service.h"
#include "transport/write_tag.h"
#include "sample_keys_support.h"
#include "storage_test_support.h"
#include "transport/connection.h"
#include "transport/wire_codec.h"
#include "transport/storage_routing.h"
#include "wire_test_support.h"

namespace seqflow::test {
namespace {

using namespace std::chrono_literals;
using transport::Frames;
namespace wire = transport::wire;

// A storage service on loopback, registered with no controller.
std::unique_ptr<server::StorageService> start_unit() {
  auto unit = std::make_unique<server::StorageService>(server::StorageServiceOptions{});
  unit->start();
  return unit;
}

// Requests naming samples `indexes` (partition "p", generation 1) by their keys.
Tree keys_of(const std::vector<int64_t>& indexes, uint64_t write_version = 0, const FieldVersions* read = nullptr) {
  const TestSamples samples = samples_of(indexes);
  SampleKeys keys = samples;
  keys.write_version = write_version;
  keys.read_versions = read;
  std::vector<size_t> all(indexes.size());
  std::iota(all.begin(), all.end(), size_t{0});
  MsgpackMapWriter header;
  wire::add_sample_keys(header, keys, all);
  return tree_of(header);
}

Frames put_request(const std::vector<int64_t>& indexes, const std::vector<int64_t>& values, uint64_t version) {
  Frames frames(1);
  Tree header = keys_of(indexes, version);
  header["columns"] = Tree::read(wire::append_columns({int64_column("x", values)}, {}, frames));
  frames[0] = tree_frame(header);
  return frames;
}

// A commit (or a discard: the same request) of field "x", with the write
// tag the unit's controller would hand out (none without a token).
Frames commit_request(const std::vector<int64_t>& indexes, uint64_t version, const std::string& unit_token = "") {
  Tree header = keys_of(indexes, version);
  header["fields"] = Tree::array({"x"});
  if (!unit_token.empty()) header["write_tag"] = transport::write_tag(unit_token, version);
  return message_of(header);
}

// Field "x" of each sample, read at `read` (null: the committed values).
std::vector<int64_t> get_x(transport::Connection& unit, const std::vector<int64_t>& indexes,
                           const FieldVersions* read = nullptr) {
  Tree header = keys_of(indexes, 0, read);
  header["fields"] = Tree::array({"x"});
  Frames reply = unit.call("get", message_of(header));
  const EncodedMap received = wire::read_header(reply, 0, "get reply", {"fields", "local_frames", "lease"});
  std::vector<int64_t> out;
  for (const auto& row : wire::take_views(received.value("fields"), reply, 1, indexes.size(), 1, "get reply")) {
    out.push_back(int64_of(row[0]));
  }
  return out;
}

TEST(StorageServiceVersions, AStagedPutIsServedOnlyAtItsVersionUntilCommitted) {
  const auto service = start_unit();
  zmq::context_t context;
  transport::Connection unit(context, service->endpoint(), transport::ConnectionOptions{.timeout = 5s, .security = {}});
  const std::vector<int64_t> gis = {3, 8};
  unit.call("put", put_request(gis, {10, 11}, 0));
  unit.call("put", put_request(gis, {20, 21}, 2));
  EXPECT_EQ(get_x(unit, gis), (std::vector<int64_t>{10, 11}));
  const FieldVersions mixed = {{"x", {2, 0}}};
  EXPECT_EQ(get_x(unit, gis, &mixed), (std::vector<int64_t>{20, 11}));

  // Without the controller's tag for version 2 (none, or another version's), no peer settles it.
  for (const std::string op : {"commit", "discard"}) {
    EXPECT_TRUE(throws_error(ErrorCode::kPermissionDenied, [&] { unit.call(op, commit_request(gis, 2)); },
                             {op + " of write_version 2 refused", "write_tag"}));
    Frames forged = commit_request(gis, 2);
    Tree header = tree_of(forged[0]);
    header["write_tag"] = transport::write_tag(service->admin_token(), 3);
    EXPECT_TRUE(throws_error(ErrorCode::kPermissionDenied, [&] { unit.call(op, message_of(header)); }, {"write_tag"}));
  }
  EXPECT_EQ(get_x(unit, gis, &mixed), (std::vector<int64_t>{20, 11}));  // still staged, still held
  const Frames reply = unit.call("commit", commit_request(gis, 2, service->admin_token()));
  EXPECT_EQ(tree_of(reply[0]), Tree::map());
  EXPECT_EQ(get_x(unit, gis), (std::vector<int64_t>{20, 21}));
  unit.call("put", put_request(gis, {1, 1}, 1));  // lost to the committed 2
  EXPECT_EQ(get_x(unit, gis), (std::vector<int64_t>{20, 21}));
  EXPECT_EQ(service->storage().stats().bytes, 16u);
}

TEST(StorageServiceVersions, BadVersionsGetErrorsNamingThemAndChangeNothing) {
  const auto service = start_unit();
  zmq::context_t context;
  transport::Connection unit(context, service->endpoint(), transport::ConnectionOptions{.timeout = 5s, .security = {}});
  const std::vector<int64_t> gis = {0, 1};
  unit.call("put", put_request(gis, {10, 11}, 0));
  unit.call("put", put_request(gis, {20, 21}, 2));

  Tree get = keys_of(gis);
  get["fields"] = Tree::array({"x"});
  get["read_versions"] = Tree{{"x", Tree::numbers(std::vector<uint64_t>{2})}};
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.call("get", message_of(get)); },
                           {"get request field 'read_versions'", "'x'", "2 samples"}));
  get["read_versions"] = Tree{{"x", "two"}};
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.call("get", message_of(get)); },
                           {"'read_versions'", "binary"}));
  get["read_versions"] = Tree::array({1});
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.call("get", message_of(get)); },
                           {"'read_versions'", "map"}));
  get.erase("read_versions");
  get["write_version"] = 2;  // a get reads; it writes no version
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.call("get", message_of(get)); },
                           {"get request has an unknown field 'write_version'"}));

  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.call("commit", commit_request(gis, 0)); },
                           {"write_version", "got 0"}));
  Tree commit = keys_of(gis);
  commit["fields"] = Tree::array({"x"});
  commit["write_version"] = -2;
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.call("commit", message_of(commit)); },
                           {"commit request field 'write_version'", "unsigned integer", "-2"}));
  commit["write_version"] = 2;
  commit["columns"] = Tree::array();
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.call("commit", message_of(commit)); },
                           {"commit request has an unknown field 'columns'"}));
  EXPECT_EQ(get_x(unit, gis), (std::vector<int64_t>{10, 11}));
}

// Float samples of `width` values each; sample i holds base + i * width + j.
Column float_column(const std::string& field, size_t samples, size_t width, float base) {
  Column column = wide_column(field, samples, width);
  std::vector<float> values(samples * width);
  for (size_t i = 0; i < values.size(); ++i) values[i] = base + static_cast<float>(i);
  column.buffer = Buffer::copy_of(std::as_bytes(std::span<const float>(values)));
  return column;
}

float first_float(const SampleView& view) {
  float value = 0;
  std::memcpy(&value, view.bytes().data(), sizeof value);
  return value;
}

// By TCP (false) or by same-host copy (true).
class ShardedStorageVersions : public ::testing::TestWithParam<bool> {
 protected:
  ShardedStorageVersions() {
    auto context = std::make_shared<zmq::context_t>(1);
    std::vector<std::shared_ptr<transport::ConnectionPool>> pools;
    for (size_t u = 0; u < 2; ++u) {
      units_.push_back(start_unit());
      pools.push_back(std::make_shared<transport::ConnectionPool>(
          context, units_[u]->endpoint(), transport::ConnectionOptions{.timeout = 5s, .security = {}}));
    }
    // No controller: puts, gets and commits go to the units alone.
    storage_ = std::make_unique<ShardedStorage>(std::move(pools), nullptr, GetParam());
  }

  // The first value of field "a" of each sample.
  std::vector<float> firsts(const SampleKeys& keys) const {
    const std::string fields[] = {"a"};
    std::vector<float> out;
    for (const auto& row : storage_->get(keys, fields)) out.push_back(first_float(row.at(0)));
    return out;
  }

  double local_puts() const {
    double total = 0;
    for (const auto& unit : units_) {
      total += unit->metrics().counter("seqflow_storage_local_copy_bytes_total", "", {{"direction", "put"}}).value();
    }
    return total;
  }

  std::vector<std::unique_ptr<server::StorageService>> units_;
  std::unique_ptr<ShardedStorage> storage_;
};

TEST_P(ShardedStorageVersions, EachUnitStagesReadsAndCommitsItsSamples) {
  // 8 samples of 64 KiB: each unit's share is large enough for same-host copy.
  constexpr size_t kSamples = 8;
  constexpr size_t kWidth = 16384;
  // The first four on unit 0, the others on unit 1 (placed in blocks).
  constexpr int64_t kBlock = transport::kPlacementBlock;
  const std::vector<int64_t> gis = {0, 1, 2, 3, kBlock, kBlock + 1, kBlock + 2, kBlock + 3};
  const TestSamples samples = samples_of(gis);
  storage_->put(samples, {float_column("a", kSamples, kWidth, 0)});
  SampleKeys staged = samples;
  staged.write_version = 7;
  std::vector<uint64_t> tags;  // what the controller hands the writer, per unit in routing order
  for (const auto& unit : units_) tags.push_back(transport::write_tag(unit->admin_token(), 7));
  staged.write_tags = tags;
  storage_->put(staged, {float_column("a", kSamples, kWidth, 0.5f)});
  if (GetParam()) {
    EXPECT_GE(local_puts(), 2.0 * kSamples * kWidth * sizeof(float));  // both puts by same-host copy
  } else {
    EXPECT_EQ(local_puts(), 0.0);
  }
  for (const auto& unit : units_) EXPECT_EQ(unit->storage().stats().samples, kSamples / 2);

  std::vector<float> old_values;
  std::vector<float> new_values;
  for (size_t i = 0; i < kSamples; ++i) {
    old_values.push_back(static_cast<float>(i * kWidth));
    new_values.push_back(0.5f + static_cast<float>(i * kWidth));
  }
  EXPECT_EQ(firsts(samples), old_values);
  // Each unit reads its samples' versions: unit 1's at 7.
  const FieldVersions unit_1_at_seven = {{"a", {0, 0, 0, 0, 7, 7, 7, 7}}};
  SampleKeys reading = samples;
  reading.read_versions = &unit_1_at_seven;
  std::vector<float> mixed = old_values;
  for (size_t i = kSamples / 2; i < kSamples; ++i) mixed[i] = new_values[i];
  EXPECT_EQ(firsts(reading), mixed);

  const std::string fields[] = {"a"};
  {
    // A call whose deadline has passed sends no commit.
    const CallDeadline passed(CallDeadline::Clock::now() - 1s);
    EXPECT_TRUE(
        throws_error(ErrorCode::kTimeout, [&] { storage_->commit(staged, fields); }, {"request 'commit'", "not sent"}));
  }
  EXPECT_EQ(firsts(samples), old_values);
  storage_->commit(staged, fields);
  EXPECT_EQ(firsts(samples), new_values);
  for (const auto& unit : units_) {
    EXPECT_EQ(unit->storage().stats().bytes, kSamples / 2 * kWidth * sizeof(float));  // version 0 dropped
  }
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { storage_->commit(samples, fields); }, {"write_version"}));
}

// Three blocks of 32 KiB rows: unit 0 holds blocks 0 and 2, two runs that
// travel as segments of their own over TCP; every value reads back in place.
TEST_P(ShardedStorageVersions, APutOfRunsOnEachUnitReadsBackWhole) {
  constexpr size_t kSamples = 3 * transport::kPlacementBlock;
  constexpr size_t kWidth = 8192;
  std::vector<int64_t> gis(kSamples);
  std::iota(gis.begin(), gis.end(), 0);
  const TestSamples samples = samples_of(gis);
  storage_->put(samples, {float_column("a", kSamples, kWidth, 0)});
  std::vector<float> expected;
  for (size_t i = 0; i < kSamples; ++i) expected.push_back(static_cast<float>(i * kWidth));
  EXPECT_EQ(firsts(samples), expected);
  EXPECT_EQ(units_[0]->storage().stats().samples, 2 * transport::kPlacementBlock);
  EXPECT_EQ(units_[1]->storage().stats().samples, transport::kPlacementBlock);
}

INSTANTIATE_TEST_SUITE_P(Transfers, ShardedStorageVersions, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "LocalCopy" : "Tcp"; });

}  // namespace
}  // namespace seqflow::test
