// Write versions on the controller and in BatchMeta: per sample and field
// the highest committed version wins, tags land with their write's data,
// only versions the controller drew are taken, checkpoints keep them, and
// every BatchMeta operation and the wire carry them.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "client/coordinating_client.h"
#include "controller_test_support.h"
#include "seqflow/batch_meta.h"
#include "seqflow/controller.h"
#include "seqflow/error.h"
#include "seqflow/storage.h"
#include "storage_test_support.h"
#include "transport/control_protocol.h"
#include "transport/wire_codec.h"
#include "wire_test_support.h"

namespace seqflow::test {
namespace {

namespace control = transport::control;

MetaRequest everything(const std::string& partition, std::vector<std::string> fields, int64_t count) {
  MetaRequest request = fetch_request(partition, "reader", std::move(fields), count);
  request.mode = MetaMode::kForceFetch;
  return request;
}

uint64_t draw_version(Controller& controller, const std::string& partition, std::span<const int64_t> indexes) {
  return controller.sample_production(partition, indexes, {}, {}).write_version;
}

std::string writer_of(const BatchMeta& meta, size_t sample) {
  const Value tag = meta.custom_meta[sample];
  const Value* writer = tag.find("writer");
  return writer == nullptr ? "" : writer->as_string();
}

TEST(WriteVersions, TheNewestWriteWinsPerFieldAndItsTagsLandWithIt) {
  Controller controller;
  const std::vector<int64_t> indexes = put(controller, "p", 2, {"x"});
  const uint64_t older = draw_version(controller, "p", indexes);
  const uint64_t newer = draw_version(controller, "p", indexes);
  ASSERT_LT(older, newer);

  const std::vector<Value> newer_tags(2, Value{{"writer", "newer"}});
  const std::vector<Value> older_tags(2, Value{{"writer", "older"}});
  controller.mark_produced("p", indexes, {}, fields_of({"x"}), newer_tags, newer);
  // The older write commits last: it changes neither x's version nor the tags.
  controller.mark_produced("p", indexes, {}, fields_of({"x", "y"}), older_tags, older);

  const BatchMeta meta = controller.get_meta(everything("p", {"x", "y"}, 2));
  ASSERT_EQ(meta.size(), 2u);
  EXPECT_EQ(meta.versions.at("x"), std::vector<uint64_t>(2, newer));
  EXPECT_EQ(meta.versions.at("y"), std::vector<uint64_t>(2, older));  // y only the older one wrote
  EXPECT_EQ(writer_of(meta, 0), "newer");
  EXPECT_EQ(writer_of(meta, 1), "newer");
}

// mark_produced tells an overwrite what is committed now: the newer write's
// version and tags where that one won, its own elsewhere.
TEST(WriteVersions, MarkProducedReturnsWhatIsCommittedWhereANewerWriteWon) {
  Controller controller;
  const std::vector<int64_t> indexes = put(controller, "p", 2, {"x", "y"});
  const uint64_t older = draw_version(controller, "p", indexes);
  const uint64_t newer = draw_version(controller, "p", indexes);
  const std::vector<int64_t> first = {indexes[0]};
  const CommittedWrite won =
      controller.mark_produced("p", first, {}, fields_of({"x"}), std::vector<Value>{Value{{"writer", "newer"}}}, newer);
  EXPECT_EQ(won.versions.at("x"), std::vector<uint64_t>{newer});
  EXPECT_TRUE(won.newer_meta_positions.empty());

  const std::vector<Value> older_tags(2, Value{{"writer", "older"}});
  const CommittedWrite lost = controller.mark_produced("p", indexes, {}, fields_of({"x", "y"}), older_tags, older);
  EXPECT_EQ(lost.versions.at("x"), (std::vector<uint64_t>{newer, older}));
  EXPECT_EQ(lost.versions.at("y"), (std::vector<uint64_t>{older, older}));
  // Sample 0: y landed, but the newer write's tags stay (a newer write's tags are never replaced by an older's).
  ASSERT_EQ(lost.newer_meta_positions, std::vector<int64_t>{0});
  EXPECT_EQ(lost.newer_metas.at(0).find("writer")->as_string(), "newer");
  EXPECT_TRUE(controller.mark_produced("p", indexes, {}, fields_of({"z"}), {}).versions.empty())
      << "a first write has nothing to report";
}

// A data plane that, on the first versioned put, first lets another writer
// overwrite the same samples: that writer draws a newer version and
// commits before the put it interrupted, which then goes on, or is refused.
class InterleavingStorage final : public DataPlane {
 public:
  explicit InterleavingStorage(std::shared_ptr<StorageUnit> unit) : unit_(std::move(unit)) {}
  std::function<void()> before_versioned_put;
  bool refuse_that_put = false;

  void put(const SampleKeys& samples, const std::vector<Column>& columns) override {
    if (samples.write_version != 0 && before_versioned_put) {
      std::exchange(before_versioned_put, nullptr)();
      if (refuse_that_put) throw Error(ErrorCode::kInvalidArgument, "the unit refuses the interrupted put");
    }
    unit_->put(samples, columns);
  }
  std::vector<std::vector<SampleView>> get(const SampleKeys& samples,
                                           std::span<const std::string> fields) const override {
    return unit_->get(samples, fields);
  }
  void commit(const SampleKeys& samples, std::span<const std::string> fields) override {
    unit_->commit(samples, fields);
  }
  void discard(const SampleKeys& samples, std::span<const std::string> fields) override {
    unit_->discard(samples, fields);
  }
  void clear(std::span<const int64_t> global_indexes) override { unit_->clear(global_indexes); }
  void clear_generations(std::span<const int64_t> global_indexes, std::span<const uint64_t> generations) override {
    unit_->clear_generations(global_indexes, generations);
  }
  void clear_all() override { unit_->clear_all(); }
  StorageStats stats() const override { return unit_->stats(); }
  void save(const std::string& path) const override { unit_->save(path); }
  void load(const std::string& path) override { unit_->load(path); }

 private:
  std::shared_ptr<StorageUnit> unit_;
};

// Two embedded clients of one controller and one unit: `interrupted`
// writes through an InterleavingStorage, `other` straight to the unit.
struct TwoWriters {
  std::shared_ptr<Controller> controller = std::make_shared<Controller>();
  std::shared_ptr<StorageUnit> unit = std::make_shared<StorageUnit>();
  std::shared_ptr<InterleavingStorage> interleaving = std::make_shared<InterleavingStorage>(unit);
  CoordinatingClient interrupted{controller, interleaving, ReleasedData::kDroppedByClient};
  CoordinatingClient other{controller, unit, ReleasedData::kDroppedByClient};
};

// The writer whose overwrite lost gets a BatchMeta naming what readers
// see (the newer write's version and tags), never its own staged values.
TEST(WriteVersions, AWriterWhoseOverwriteLostIsHandedWhatWonNotItsOwnStagedValues) {
  TwoWriters writers;
  auto& interleaving = writers.interleaving;
  CoordinatingClient& slow = writers.interrupted;
  CoordinatingClient& fast = writers.other;
  const BatchMeta first = fast.put_new("p", {int64_column("x", {1, 2})}, {});
  BatchMeta winner;
  interleaving->before_versioned_put = [&] {
    winner = fast.put_existing(first, {int64_column("x", {30, 40})}, std::vector<Value>(2, Value{{"writer", "fast"}}));
  };
  const BatchMeta lost =
      slow.put_existing(first, {int64_column("x", {10, 20})}, std::vector<Value>(2, Value{{"writer", "slow"}}));

  ASSERT_FALSE(winner.versions.empty());
  EXPECT_EQ(lost.versions.at("x"), winner.versions.at("x"));
  EXPECT_EQ(writer_of(lost, 0), "fast");
  EXPECT_EQ(writer_of(lost, 1), "fast");
  const std::string fields[] = {"x"};
  const auto rows = slow.get_data(lost, fields);
  EXPECT_EQ(int64_of(rows[0][0]), 30);
  EXPECT_EQ(int64_of(rows[1][0]), 40);
}

// A kv_put makes a key, another writer's kv_put of it lands, then the first
// is refused: its rollback releases the key only if nothing is produced in
// it, so the other writer's value stays, readable.
TEST(WriteVersions, AFailedKvPutKeepsAKeyAnotherWriterFilledMeanwhile) {
  TwoWriters writers;
  auto& interleaving = writers.interleaving;
  CoordinatingClient& refused = writers.interrupted;
  CoordinatingClient& other = writers.other;
  const std::string keys[] = {"k"};
  interleaving->before_versioned_put = [&] { other.kv_put("p", keys, {}, {int64_column("x", {42})}); };
  interleaving->refuse_that_put = true;
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument,
                           [&] { refused.kv_put("p", keys, {}, {int64_column("x", {1})}); },
                           {"refuses the interrupted put"}));
  const BatchMeta meta = other.kv_meta("p", keys);
  const std::string fields[] = {"x"};
  EXPECT_EQ(int64_of(other.get_data(meta, fields).at(0).at(0)), 42);
}

TEST(WriteVersions, TheWireCarriesACommittedWriteAndRefusesPositionsOutsideTheWrite) {
  CommittedWrite committed;
  committed.versions["x"] = {7, 9};
  committed.newer_meta_positions = {1};
  committed.newer_metas = {Value{{"writer", "newer"}}};
  const CommittedWrite back = control::decode_mark_produced_reply(control::encode_mark_produced_reply(committed), 2);
  EXPECT_EQ(back.versions, committed.versions);
  EXPECT_EQ(back.newer_meta_positions, committed.newer_meta_positions);
  EXPECT_EQ(back.newer_metas.at(0).find("writer")->as_string(), "newer");
  EXPECT_TRUE(control::decode_mark_produced_reply(control::encode_mark_produced_reply({}), 2).versions.empty());

  EXPECT_TRUE(
      throws_invalid([&] { control::decode_mark_produced_reply(control::encode_mark_produced_reply(committed), 1); },
                     {"reply", "versions", "1 samples need one u64 version each"}));
  committed.newer_meta_positions = {5};
  EXPECT_TRUE(
      throws_invalid([&] { control::decode_mark_produced_reply(control::encode_mark_produced_reply(committed), 2); },
                     {"newer_meta_positions", "holds 5, outside the 2 samples written"}));
  committed.newer_meta_positions = {0, 1};
  EXPECT_TRUE(
      throws_invalid([&] { control::decode_mark_produced_reply(control::encode_mark_produced_reply(committed), 2); },
                     {"newer_metas", "one object per position"}));
}

TEST(WriteVersions, AnOlderWritesTagsDoNotLandWhereNoneOfItsValuesDid) {
  Controller controller;
  const std::vector<int64_t> indexes = put(controller, "p", 1, {"x", "y"});
  const uint64_t older = draw_version(controller, "p", indexes);
  const uint64_t newer = draw_version(controller, "p", indexes);
  controller.mark_produced("p", indexes, {}, fields_of({"x"}), {}, newer);  // no tags
  controller.mark_produced("p", indexes, {}, fields_of({"x"}), std::vector<Value>{Value{{"writer", "older"}}}, older);
  EXPECT_EQ(writer_of(controller.get_meta(everything("p", {"x"}, 1)), 0), "");
  // Where one of its values lands (y), its tags do.
  controller.mark_produced("p", indexes, {}, fields_of({"x", "y"}), std::vector<Value>{Value{{"writer", "older"}}},
                           older);
  EXPECT_EQ(writer_of(controller.get_meta(everything("p", {"x"}, 1)), 0), "older");
}

TEST(WriteVersions, FieldsNeverOverwrittenCarryNoVersions) {
  Controller controller;
  put(controller, "p", 3, {"x", "y"});
  EXPECT_TRUE(controller.get_meta(everything("p", {"x", "y"}, 3)).versions.empty());
}

TEST(WriteVersions, AVersionTheControllerNeverDrewIsRefused) {
  Controller controller;
  const std::vector<int64_t> indexes = put(controller, "p", 1, {"x"});
  const uint64_t drawn = draw_version(controller, "p", indexes);
  EXPECT_TRUE(throws_invalid([&] { controller.mark_produced("p", indexes, {}, fields_of({"x"}), {}, drawn + 1000); },
                             {"write_version " + std::to_string(drawn + 1000), "never handed out"}));
  EXPECT_TRUE(controller.get_meta(everything("p", {"x"}, 1)).versions.empty());
}

TEST(WriteVersions, ACheckpointKeepsVersionsAndLaterOnesStayAboveThem) {
  const TempFile checkpoint("write_versions");
  Controller original;
  const std::vector<int64_t> indexes = put(original, "p", 2, {"x"});
  const uint64_t version = draw_version(original, "p", indexes);
  original.mark_produced("p", indexes, {}, fields_of({"x"}), std::vector<Value>(2, Value{{"writer", "w"}}), version);
  original.save(checkpoint.path());

  Controller restored;
  restored.load(checkpoint.path());
  const BatchMeta meta = restored.get_meta(everything("p", {"x"}, 2));
  EXPECT_EQ(meta.versions.at("x"), std::vector<uint64_t>(2, version));
  const uint64_t later = draw_version(restored, "p", indexes);
  EXPECT_GT(later, version);
  // The tags' version came back too: an older write still cannot replace them.
  restored.mark_produced("p", indexes, {}, fields_of({"x"}), std::vector<Value>(2, Value{{"writer", "late"}}),
                         version - 1);
  EXPECT_EQ(writer_of(restored.get_meta(everything("p", {"x"}, 2)), 0), "w");
}

BatchMeta versioned_meta() {
  BatchMeta meta;
  meta.global_indexes = {10, 11, 12};
  meta.partition_ids = PartitionIdList(3, "p");
  meta.generations = {1, 2, 3};
  meta.field_schema = {{"x", tensor_schema()}, {"y", tensor_schema()}};
  meta.production_status = std::vector<uint8_t>(6, 1);
  meta.custom_meta = CustomMetaList(3);
  meta.versions = {{"x", {7, 0, 9}}};
  return meta;
}

TEST(WriteVersions, BatchMetaOperationsCarryThem) {
  const BatchMeta meta = versioned_meta();
  const std::vector<int64_t> positions = {2, 0};
  EXPECT_EQ(meta.select_samples(positions).versions.at("x"), (std::vector<uint64_t>{9, 7}));
  EXPECT_EQ(meta.slice(1, 3).versions.at("x"), (std::vector<uint64_t>{0, 9}));
  const std::vector<std::string> only_y = {"y"};
  EXPECT_TRUE(meta.select_fields(only_y).versions.empty());
  const std::vector<std::string> only_x = {"x"};
  EXPECT_EQ(meta.select_fields(only_x).versions.at("x"), meta.versions.at("x"));

  BatchMeta plain = meta;
  plain.versions.clear();
  const BatchMeta* parts[] = {&plain, &meta};
  EXPECT_EQ(BatchMeta::concat(parts, true).versions.at("x"), (std::vector<uint64_t>{0, 0, 0, 7, 0, 9}));

  BatchMeta other = plain;  // other's x wins the union: its versions (none) with it
  other.field_schema = {{"x", tensor_schema()}};
  other.production_status = std::vector<uint8_t>(3, 1);
  EXPECT_TRUE(meta.union_with(other).versions.empty());
  EXPECT_EQ(other.union_with(meta).versions.at("x"), meta.versions.at("x"));
}

TEST(WriteVersions, TheWireCarriesThemAndRefusesAWrongCount) {
  const BatchMeta meta = versioned_meta();
  EXPECT_EQ(decode_batch_meta(encode_batch_meta(meta), "reply").versions, meta.versions);

  BatchMeta wrong = meta;
  wrong.versions["x"].pop_back();
  EXPECT_TRUE(throws_invalid([&] { decode_batch_meta(encode_batch_meta(wrong), "reply"); },
                             {"versions", "of field 'x'", "one u64 version each"}));
}

}  // namespace
}  // namespace seqflow::test
