// StorageUnit's write versions: staged writes beside the committed value,
// what readers of each version see, commits, the writes and commits that
// lost, their bytes and capacity, clears and checkpoints (also of the
// format before versions).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "durable/framed_file.h"
#include "seqflow/error.h"
#include "seqflow/storage.h"
#include "storage/checkpoint.h"
#include "sample_keys_support.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

const std::vector<int64_t> kTwo = {0, 1};

SampleKeys writing(const TestSamples& samples, uint64_t version) {
  SampleKeys keys = samples;
  keys.write_version = version;
  return keys;
}

SampleKeys reading(const TestSamples& samples, const FieldVersions& versions) {
  SampleKeys keys = samples;
  keys.read_versions = &versions;
  return keys;
}

// Field "x" of each sample as text.
std::vector<std::string> texts_of(const std::vector<std::vector<SampleView>>& rows) {
  std::vector<std::string> out;
  for (const auto& row : rows) out.push_back(text_of(row.at(0)));
  return out;
}

std::vector<std::string> committed_x(const StorageUnit& unit, const TestSamples& samples) {
  return texts_of(unit.get(samples, kFieldX));
}

std::vector<std::string> x_at(const StorageUnit& unit, const TestSamples& samples, std::vector<uint64_t> versions) {
  const FieldVersions read = {{"x", std::move(versions)}};
  return texts_of(unit.get(reading(samples, read), kFieldX));
}

using Texts = std::vector<std::string>;

TEST(StorageVersions, AStagedWriteIsReadOnlyByItsVersionUntilCommitted) {
  StorageUnit unit;
  const TestSamples two = samples_of(kTwo);
  unit.put(two, {object_column("x", {"a0", "a1"})});
  unit.put(writing(two, 3), {object_column("x", {"b0", "b1"})});
  EXPECT_EQ(committed_x(unit, two), (Texts{"a0", "a1"}));
  EXPECT_EQ(x_at(unit, two, {3, 3}), (Texts{"b0", "b1"}));
  EXPECT_EQ(x_at(unit, two, {0, 3}), (Texts{"a0", "b1"}));  // per sample
  const FieldVersions other_field = {{"y", {3, 3}}};        // names another field: x reads committed
  EXPECT_EQ(texts_of(unit.get(reading(two, other_field), kFieldX)), (Texts{"a0", "a1"}));
  EXPECT_EQ(unit.stats().samples, 2u);
  EXPECT_EQ(unit.stats().bytes, 8u);  // both versions of both samples
  EXPECT_EQ(unit.stats().overhead_bytes, 2 * kSampleOverheadBytes + 4 * kValueOverheadBytes);

  unit.commit(writing(two, 3), kFieldX);
  EXPECT_EQ(committed_x(unit, two), (Texts{"b0", "b1"}));
  EXPECT_EQ(x_at(unit, two, {3, 0}), (Texts{"b0", "b1"}));
}

TEST(StorageVersions, ACommitPromotesItsVersionAndDropsTheOlderOnes) {
  StorageUnit unit;
  const TestSamples two = samples_of(kTwo);
  unit.put(two, {object_column("x", {"aa", "aa"})});
  unit.put(writing(two, 2), {object_column("x", {"bbb", "bbb"})});
  unit.put(writing(two, 5), {object_column("x", {"ccccc", "ccccc"})});
  const SampleView before = unit.get(two, kFieldX)[0][0];
  EXPECT_EQ(unit.stats().bytes, 2u * (2 + 3 + 5));

  unit.commit(writing(two, 2), kFieldX);
  EXPECT_EQ(committed_x(unit, two), (Texts{"bbb", "bbb"}));
  EXPECT_EQ(unit.stats().bytes, 2u * (3 + 5));  // version 0 dropped
  EXPECT_EQ(unit.stats().overhead_bytes, 2 * kSampleOverheadBytes + 4 * kValueOverheadBytes);
  EXPECT_EQ(x_at(unit, two, {1, 5}), (Texts{"bbb", "ccccc"}));  // 1: older than the committed 2, which wins
  EXPECT_EQ(text_of(before), "aa");                             // a view read before lives on
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound,
                           [&] {
                             x_at(unit, two, {4, 4});
                           },
                           {"no version 4", "\"x\"", "global index 0", "partition 'p'", "committed: version 2"}));

  unit.commit(writing(two, 5), kFieldX);
  EXPECT_EQ(committed_x(unit, two), (Texts{"ccccc", "ccccc"}));
  EXPECT_EQ(unit.stats().bytes, 2u * 5);
  EXPECT_EQ(unit.stats().overhead_bytes, 2 * kSampleOverheadBytes + 2 * kValueOverheadBytes);
}

TEST(StorageVersions, ADiscardDropsOnlyItsStagedVersion) {
  StorageUnit unit;
  const TestSamples two = samples_of(kTwo);
  unit.put(two, {object_column("x", {"aa", "aa"})});
  const StorageStats before = unit.stats();
  unit.put(writing(two, 2), {object_column("x", {"bbb", "bbb"})});
  unit.put(writing(two, 5), {object_column("x", {"ccccc", "ccccc"})});

  unit.discard(writing(two, 2), kFieldX);
  EXPECT_EQ(x_at(unit, two, {5, 5}), (Texts{"ccccc", "ccccc"}));  // another write's staged value stays
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { x_at(unit, two, {2, 2}); }, {"no version 2"}));
  unit.discard(writing(two, 5), kFieldX);
  EXPECT_EQ(unit.stats().bytes, before.bytes);  // as before either put
  EXPECT_EQ(unit.stats().overhead_bytes, before.overhead_bytes);
  EXPECT_EQ(committed_x(unit, two), (Texts{"aa", "aa"}));

  // A committed version is not the discard's to drop.
  unit.put(writing(two, 7), {object_column("x", {"d", "d"})});
  unit.commit(writing(two, 7), kFieldX);
  unit.discard(writing(two, 7), kFieldX);
  EXPECT_EQ(committed_x(unit, two), (Texts{"d", "d"}));
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.discard(writing(two, 0), kFieldX); },
                           {"discard needs write_version above 0"}));
}

TEST(StorageVersions, ADiscardOfAFieldOnlyEverStagedLeavesNothingBehind) {
  StorageUnit unit;
  const TestSamples two = samples_of(kTwo);
  unit.put(two, {object_column("x", {"aa", "aa"})});
  const StorageStats before = unit.stats();
  unit.put(writing(two, 2), {object_column("y", {"new", "new"})});  // a new field, staged
  unit.discard(writing(two, 2), std::vector<std::string>{"y"});
  EXPECT_EQ(unit.stats().bytes, before.bytes);
  EXPECT_EQ(unit.stats().overhead_bytes, before.overhead_bytes);
  EXPECT_EQ(unit.stats().samples, before.samples);

  const TestSamples fresh = samples_of(std::vector<int64_t>{5});  // a sample with no value but a staged one
  unit.put(writing(fresh, 3), {object_column("x", {"staged"})});
  unit.discard(writing(fresh, 3), kFieldX);
  EXPECT_EQ(unit.stats().samples, before.samples);
  EXPECT_EQ(unit.stats().overhead_bytes, before.overhead_bytes);
}

TEST(StorageVersions, ACommitTouchesOnlyItsFieldsAndSamples) {
  StorageUnit unit;
  const TestSamples two = samples_of(kTwo);
  unit.put(two, {object_column("x", {"x0", "x1"}), object_column("y", {"y0", "y1"})});
  unit.put(writing(two, 2), {object_column("x", {"X0", "X1"}), object_column("y", {"Y0", "Y1"})});
  unit.commit(writing(samples_of(std::vector<int64_t>{1}), 2), kFieldX);
  EXPECT_EQ(committed_x(unit, two), (Texts{"x0", "X1"}));
  const std::string y[] = {"y"};
  EXPECT_EQ(text_of(unit.get(two, y)[1][0]), "y1");
}

TEST(StorageVersions, AWriteAtOrBelowTheCommittedVersionIsIgnored) {
  StorageUnit unit;
  const TestSamples two = samples_of(kTwo);
  unit.put(writing(two, 4), {object_column("x", {"four", "four"})});
  unit.commit(writing(two, 4), kFieldX);
  const StorageStats committed = unit.stats();
  unit.put(writing(two, 4), {object_column("x", {"late", "late"})});
  unit.put(writing(two, 2), {object_column("x", {"older", "older"})});
  EXPECT_EQ(committed_x(unit, two), (Texts{"four", "four"}));
  EXPECT_EQ(x_at(unit, two, {4, 2}), (Texts{"four", "four"}));
  EXPECT_EQ(unit.stats().bytes, committed.bytes);
  EXPECT_EQ(unit.stats().overhead_bytes, committed.overhead_bytes);

  unit.put(writing(two, 6), {object_column("x", {"six", "six"})});  // newer: staged
  EXPECT_EQ(x_at(unit, two, {6, 0}), (Texts{"six", "four"}));
}

TEST(StorageVersions, ACommitOfAVersionThatLostOrWasNeverStoredChangesNothing) {
  StorageUnit unit;
  const TestSamples two = samples_of(kTwo);
  unit.put(writing(two, 2), {object_column("x", {"two", "two"})});
  unit.put(writing(two, 5), {object_column("x", {"five", "five"})});
  unit.commit(writing(two, 5), kFieldX);
  const StorageStats after = unit.stats();
  unit.commit(writing(two, 2), kFieldX);                                  // lost to 5 (and dropped by its commit)
  unit.commit(writing(two, 7), kFieldX);                                  // never stored
  unit.commit(writing(samples_of(std::vector<int64_t>{9}), 5), kFieldX);  // no such sample
  const std::string missing[] = {"nothing"};
  unit.commit(writing(two, 5), missing);
  EXPECT_EQ(committed_x(unit, two), (Texts{"five", "five"}));
  EXPECT_EQ(x_at(unit, two, {2, 5}), (Texts{"five", "five"}));
  EXPECT_EQ(unit.stats().bytes, after.bytes);
  EXPECT_EQ(unit.stats().samples, 2u);
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.commit(two, kFieldX); }, {"write_version", "0"}));
}

TEST(StorageVersions, ARetryOfAStagedVersionReplacesIt) {
  StorageUnit unit;
  const TestSamples two = samples_of(kTwo);
  unit.put(writing(two, 3), {object_column("x", {"first", "first"})});
  unit.put(writing(two, 3), {object_column("x", {"again", "again"})});
  EXPECT_EQ(x_at(unit, two, {3, 3}), (Texts{"again", "again"}));
  EXPECT_EQ(unit.stats().bytes, 10u);
  EXPECT_EQ(unit.stats().overhead_bytes, 2 * kSampleOverheadBytes + 2 * kValueOverheadBytes);
}

TEST(StorageVersions, AnUnversionedPutReplacesTheCommittedValueAndKeepsStagedOnes) {
  StorageUnit unit;
  const TestSamples two = samples_of(kTwo);
  unit.put(two, {object_column("x", {"a", "a"})});
  unit.put(writing(two, 2), {object_column("x", {"bb", "bb"})});
  unit.commit(writing(two, 2), kFieldX);
  unit.put(writing(two, 3), {object_column("x", {"ccc", "ccc"})});
  unit.put(two, {object_column("x", {"z", "z"})});  // an older client's overwrite
  EXPECT_EQ(committed_x(unit, two), (Texts{"z", "z"}));
  EXPECT_EQ(x_at(unit, two, {2, 2}), (Texts{"z", "z"}));
  // A reader the controller handed version 3 before this unit heard of its commit.
  EXPECT_EQ(x_at(unit, two, {3, 3}), (Texts{"ccc", "ccc"}));
  EXPECT_EQ(unit.stats().bytes, 8u);
  EXPECT_EQ(unit.stats().overhead_bytes, 2 * kSampleOverheadBytes + 4 * kValueOverheadBytes);
  unit.commit(writing(two, 3), kFieldX);
  EXPECT_EQ(committed_x(unit, two), (Texts{"ccc", "ccc"}));
  EXPECT_EQ(unit.stats().bytes, 6u);
}

TEST(StorageVersions, AnUnversionedPutOverOnlyStagedWritesCommitsBelowThem) {
  StorageUnit unit;
  const TestSamples two = samples_of(kTwo);
  unit.put(writing(two, 4), {object_column("x", {"staged", "staged"})});
  unit.put(two, {object_column("x", {"plain", "plain"})});
  EXPECT_EQ(committed_x(unit, two), (Texts{"plain", "plain"}));
  EXPECT_EQ(x_at(unit, two, {4, 4}), (Texts{"staged", "staged"}));
  unit.discard(writing(two, 4), kFieldX);
  EXPECT_EQ(committed_x(unit, two), (Texts{"plain", "plain"}));
  EXPECT_EQ(unit.stats().bytes, 10u);
}

TEST(StorageVersions, AFieldOnlyStagedHasNoValueForReadersOfTheCommittedOne) {
  StorageUnit unit;
  const TestSamples two = samples_of(kTwo);
  unit.put(writing(two, 2), {object_column("x", {"new", "new"})});
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { unit.get(two, kFieldX); },
                           {"storage holds no field \"x\"", "global index 0", "partition 'p'"}));
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound,
                           [&] {
                             x_at(unit, two, {1, 1});
                           },
                           {"no version 1", "\"x\"", "committed: none"}));
  EXPECT_EQ(x_at(unit, two, {2, 2}), (Texts{"new", "new"}));
  const std::string y[] = {"y"};
  const FieldVersions named_y = {{"y", {4, 4}}};
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { unit.get(reading(two, named_y), y); },
                           {"no version 4", "\"y\"", "committed: none"}));
  unit.commit(writing(two, 2), kFieldX);
  EXPECT_EQ(committed_x(unit, two), (Texts{"new", "new"}));
}

TEST(StorageVersions, AVersionedPutOfANewerGenerationDropsTheOldSampleWhole) {
  StorageUnit unit;
  const std::vector<int64_t> gi = {4};
  unit.put(samples_of(gi, 1), {object_column("x", {"old"})});
  const TestSamples next = samples_of(gi, 2);
  unit.put(writing(next, 3), {object_column("x", {"next"})});
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { unit.get(next, kFieldX); }, {"storage holds no field \"x\""}));
  EXPECT_EQ(x_at(unit, next, {3}), (Texts{"next"}));
  EXPECT_EQ(unit.stats().bytes, 4u);
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample,
                           [&] { unit.put(writing(samples_of(gi, 1), 9), {object_column("x", {"stale"})}); },
                           {"now holds generation 2"}));
}

// A sample cleared and its index reused since the put: that index holds
// another sample's values, which a commit or a discard leaves alone; the
// write's other samples are settled all the same (a refused put leaves no
// staged bytes behind on them).
TEST(StorageVersions, CommitsAndDiscardsSkipOtherSamplesValuesAndSettleTheRest) {
  StorageUnit unit;
  const std::vector<int64_t> gis = {0, 1};
  unit.put(samples_of(gis, 5), {object_column("x", {"a", "a"})});
  unit.put(writing(samples_of(gis, 5), 2), {object_column("x", {"b", "b"})});
  TestSamples mixed = samples_of(gis, 5);
  mixed.generations[1] = 4;  // a stale BatchMeta's sample
  unit.commit(writing(mixed, 2), kFieldX);
  EXPECT_EQ(x_at(unit, samples_of(gis, 5), {0, 0}), (Texts{"b", "a"}));  // only sample 0 committed
  unit.commit(writing(samples_of(gis, 5, "other"), 2), kFieldX);         // another partition's: nothing
  EXPECT_EQ(x_at(unit, samples_of(gis, 5), {0, 0}), (Texts{"b", "a"}));

  const uint64_t before = unit.stats().bytes;
  unit.put(writing(samples_of(gis, 5), 3), {object_column("x", {"ccc", "ccc"})});
  unit.discard(writing(mixed, 3), kFieldX);
  EXPECT_EQ(unit.stats().bytes, before + 3);  // sample 0's staged copy went, sample 1's stays
  const PartitionIdList p(2, "p");
  SampleKeys unknown_generations{gis, p, {}};  // by hand: partition checked only
  unknown_generations.write_version = 2;
  unit.commit(unknown_generations, kFieldX);
  EXPECT_EQ(committed_x(unit, samples_of(gis, 5)), (Texts{"b", "b"}));
}

TEST(StorageVersions, ClearsDropStagedVersions) {
  StorageUnit unit;
  const TestSamples two = samples_of(kTwo);
  unit.put(two, {object_column("x", {"a", "a"})});
  unit.put(writing(two, 2), {object_column("x", {"b", "b"})});
  unit.clear(std::vector<int64_t>{0});
  EXPECT_EQ(unit.stats().samples, 1u);
  EXPECT_EQ(unit.stats().bytes, 2u);
  EXPECT_EQ(unit.stats().overhead_bytes, kSampleOverheadBytes + 2 * kValueOverheadBytes);
  unit.clear_generations(std::vector<int64_t>{1}, std::vector<uint64_t>{1});
  EXPECT_EQ(unit.stats().samples, 0u);
  EXPECT_EQ(unit.stats().bytes, 0u);
  EXPECT_EQ(unit.stats().overhead_bytes, 0u);
  // A new sample under the index sees none of them.
  unit.put(writing(two, 1), {object_column("x", {"c", "c"})});
  EXPECT_TRUE(throws_error(ErrorCode::kNotFound, [&] { x_at(unit, two, {2, 2}); }, {"no version 2"}));
  unit.clear_all();
  EXPECT_EQ(unit.stats().bytes, 0u);
  EXPECT_EQ(unit.stats().overhead_bytes, 0u);
}

TEST(StorageVersions, MaxBytesCountsStagedValues) {
  constexpr uint64_t kValue = kValueOverheadBytes + 8;  // one int64 value and its bookkeeping
  StorageUnit unit({.max_bytes = kSampleOverheadBytes + 2 * kValue});
  const TestSamples one = samples_of(std::vector<int64_t>{0});
  unit.put(one, {int64_column("x", {1})});
  unit.put(writing(one, 2), {int64_column("x", {2})});  // full now
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.put(writing(one, 3), {int64_column("x", {3})}); },
                           {"max_bytes", "needs " + std::to_string(kValue), "0 are free"}));
  unit.put(writing(one, 2), {int64_column("x", {22})});  // a retry frees what it replaces
  unit.commit(writing(one, 2), kFieldX);                 // drops version 0
  unit.put(writing(one, 3), {int64_column("x", {3})});   // full again
  unit.put(writing(one, 2), {int64_column("x", {9})});   // lost: stores nothing, needs no room
  const FieldVersions read = {{"x", {3}}};
  EXPECT_EQ(int64_of(unit.get(one, kFieldX)[0][0]), 22);
  EXPECT_EQ(int64_of(unit.get(reading(one, read), kFieldX)[0][0]), 3);
  EXPECT_EQ(unit.stats().bytes + unit.stats().overhead_bytes, kSampleOverheadBytes + 2 * kValue);
}

TEST(StorageVersions, ReadVersionsMustHoldOneVersionPerSample) {
  StorageUnit unit;
  const TestSamples two = samples_of(kTwo);
  unit.put(two, {object_column("x", {"a", "a"})});
  const FieldVersions short_y = {{"y", {1}}};
  EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.get(reading(two, short_y), kFieldX); },
                           {"read_versions", "\"y\"", "1 versions for 2 global indexes"}));
}

// Every value of field x of samples 0..2 at each version, as text ("-": none).
std::vector<std::string> versions_seen(const StorageUnit& unit, const TestSamples& samples) {
  std::vector<std::string> out;
  for (uint64_t version = 0; version <= 6; ++version) {
    try {
      const FieldVersions read = {{"x", std::vector<uint64_t>(samples.global_indexes.size(), version)}};
      for (const std::string& text : texts_of(unit.get(reading(samples, read), kFieldX))) out.push_back(text);
    } catch (const Error&) {
      out.push_back("-");
    }
  }
  return out;
}

class StorageVersionsCheckpoint : public ::testing::Test {
 protected:
  TempDir dir_;
};

TEST_F(StorageVersionsCheckpoint, KeepsStagedAndCommittedVersionsAndWhatEachReaderSees) {
  StorageUnit source;
  const TestSamples zero = samples_of(std::vector<int64_t>{0});
  const TestSamples one = samples_of(std::vector<int64_t>{1});
  const TestSamples two = samples_of(std::vector<int64_t>{2});
  source.put(zero, {object_column("x", {"committed 0"})});
  source.put(writing(zero, 2), {object_column("x", {"committed 2"})});
  source.commit(writing(zero, 2), kFieldX);
  source.put(writing(zero, 5), {object_column("x", {"staged 5"})});
  source.put(writing(one, 3), {object_column("x", {"staged 3"})});  // nothing committed
  source.put(two, {object_column("x", {"unversioned"})});
  const std::string path = dir_.file("versions.ckpt");
  source.save(path);

  StorageUnit loaded;
  loaded.load(path);
  for (const TestSamples* samples : {&zero, &one, &two}) {
    EXPECT_EQ(versions_seen(loaded, *samples), versions_seen(source, *samples));
  }
  EXPECT_EQ(versions_seen(loaded, zero),
            (Texts{"committed 2", "committed 2", "committed 2", "-", "-", "staged 5", "-"}));
  EXPECT_EQ(loaded.stats().bytes, source.stats().bytes);
  EXPECT_EQ(loaded.stats().overhead_bytes, source.stats().overhead_bytes);
  EXPECT_EQ(loaded.stats().samples, 3u);

  const std::string again = dir_.file("again.ckpt");
  loaded.save(again);
  const auto bytes = [](const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(bytes(again), bytes(path));  // deterministic

  loaded.commit(writing(zero, 5), kFieldX);  // staged versions stay committable
  loaded.commit(writing(one, 3), kFieldX);
  EXPECT_EQ(committed_x(loaded, zero), (Texts{"staged 5"}));
  EXPECT_EQ(committed_x(loaded, one), (Texts{"staged 3"}));
}

TEST_F(StorageVersionsCheckpoint, ImpossibleVersionsAreRefused) {
  const auto value = [](uint64_t version, bool committed) {
    StoredValue stored{7, 1, "p", "x", version, committed, {}};
    stored.view.dtype = DType::kUInt8;
    stored.view.shape = {0};
    stored.view.is_object = true;
    stored.view.buffer = Buffer::copy_of(std::span<const std::byte>());
    return stored;
  };
  const struct {
    std::vector<StoredValue> values;
    std::string problem;
  } cases[] = {
      {{value(2, true), value(3, true)}, "two versions are committed"},
      {{value(2, false), value(2, false)}, "a version appears twice"},
      {{value(0, false)}, "version 0 is not committed"},
      {{value(1, false), value(2, true)}, "older than the committed one"},
  };
  StorageUnit unit;
  unit.put(samples_of(std::vector<int64_t>{42}), {object_column("x", {"keep me"})});
  for (const auto& c : cases) {
    const std::string path = dir_.file("impossible.ckpt");
    write_checkpoint(path, c.values);
    EXPECT_TRUE(throws_error(ErrorCode::kInvalidArgument, [&] { unit.load(path); },
                             {path, "corrupt", "global index 7", "\"x\"", c.problem}));
  }
  EXPECT_EQ(text_of(unit.get(samples_of(std::vector<int64_t>{42}), kFieldX)[0][0]), "keep me");
}

// A storage checkpoint as the format before write versions (2) lays it out:
// one value per (global index, field), committed.
void write_version_two_checkpoint(const std::string& path, int64_t global_index, uint64_t generation,
                                  const std::string& partition, const std::string& field, const std::string& object) {
  struct RecordHeader {
    int64_t global_index;
    uint64_t nbytes;
    uint32_t field_size;
    uint32_t rank;
    uint8_t dtype;
    uint8_t is_object;
    std::array<uint8_t, 6> zero;
  };
  struct OwnerHeader {
    uint64_t generation;
    uint32_t partition_size;
    uint32_t zero;
  };
  static_assert(sizeof(RecordHeader) == 32 && sizeof(OwnerHeader) == 16);
  constexpr durable::FileKind kVersionTwo{"SEQFSTOR", "storage checkpoint", 2, 2};
  durable::FramedFileWriter file(path, kVersionTwo);
  const auto put = [&file](const auto& value) { file.write(std::as_bytes(std::span(&value, 1))); };
  const auto put_text = [&file](const std::string& text) { file.write(std::as_bytes(std::span(text))); };
  put(uint64_t{1});
  put(RecordHeader{
      global_index, object.size(), static_cast<uint32_t>(field.size()), 1, static_cast<uint8_t>(DType::kUInt8), 1, {}});
  put(OwnerHeader{generation, static_cast<uint32_t>(partition.size()), 0});
  put_text(field);
  put_text(partition);
  put(static_cast<int64_t>(object.size()));
  const std::string padding((64 - file.offset() % 64) % 64, '\0');
  put_text(padding);
  put_text(object);
  file.commit();
}

TEST_F(StorageVersionsCheckpoint, AFileOfTheFormatBeforeVersionsLoadsAsCommittedVersionZero) {
  const std::string path = dir_.file("version-two.ckpt");
  write_version_two_checkpoint(path, 7, 4, "p", "x", "old value");
  StorageUnit unit;
  unit.load(path);
  const TestSamples seven = samples_of(std::vector<int64_t>{7}, 4);
  EXPECT_EQ(committed_x(unit, seven), (Texts{"old value"}));
  EXPECT_EQ(x_at(unit, seven, {0}), (Texts{"old value"}));
  EXPECT_EQ(unit.stats().bytes, 9u);
  EXPECT_EQ(unit.stats().overhead_bytes, kSampleOverheadBytes + kValueOverheadBytes);
  EXPECT_TRUE(throws_error(ErrorCode::kStaleSample, [&] { unit.get(samples_of(std::vector<int64_t>{7}, 5), kFieldX); },
                           {"now holds generation 4"}));
  // Version 0 is committed: the first versioned write stages beside it and commits over it.
  unit.put(writing(seven, 1), {object_column("x", {"new value"})});
  EXPECT_EQ(committed_x(unit, seven), (Texts{"old value"}));
  unit.commit(writing(seven, 1), kFieldX);
  EXPECT_EQ(committed_x(unit, seven), (Texts{"new value"}));
  EXPECT_EQ(unit.stats().bytes, 9u);
}

}  // namespace
}  // namespace seqflow::test
