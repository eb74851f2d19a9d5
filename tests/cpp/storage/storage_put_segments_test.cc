// A put in segments (StorageUnit::try_put_segments, a storage service's put
// whose client sent runs of samples as frames of their own) is stored as one
// put; segments that do not cover the put or name other fields store nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sample_keys_support.h"
#include "seqflow/error.h"
#include "seqflow/storage.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

const std::vector<std::string> kX = {"x"};
const std::vector<int64_t> kThree = {0, 1, 2};

std::vector<int64_t> values_at(const StorageUnit& unit, const std::vector<int64_t>& gis) {
  std::vector<int64_t> out;
  for (const auto& row : unit.get(samples_of(gis), kX)) out.push_back(int64_of(row[0]));
  return out;
}

TEST(StoragePutSegments, SegmentsAreStoredInTurnAsOnePut) {
  StorageUnit unit;
  const std::vector<int64_t> gis = {0, 1, 16, 17, 18};
  const std::vector<std::vector<Column>> segments = {{int64_column("x", {10, 11})}, {int64_column("x", {12, 13, 14})}};
  EXPECT_FALSE(unit.try_put_segments(samples_of(gis), segments).has_value());
  EXPECT_EQ(values_at(unit, gis), (std::vector<int64_t>{10, 11, 12, 13, 14}));
  EXPECT_EQ(unit.stats().samples, 5u);
}

TEST(StoragePutSegments, SegmentsThatDoNotFitThePutStoreNothing) {
  StorageUnit unit;
  const std::vector<int64_t> first = {0};
  unit.put(samples_of(first), {int64_column("x", {7})});
  const auto refused = [&](const std::vector<std::vector<Column>>& segments, std::vector<std::string> words) {
    return throws_error(
        ErrorCode::kInvalidArgument, [&] { unit.try_put_segments(samples_of(kThree), segments); }, std::move(words));
  };
  EXPECT_TRUE(refused({{int64_column("x", {1})}, {int64_column("x", {2})}}, {"2 segments hold 2 samples", "3"}));
  EXPECT_TRUE(refused({{int64_column("x", {1})}, {int64_column("y", {2, 3})}},
                      {"segment 1 column 0 is field \"y\"", "segment 0's is \"x\""}));
  EXPECT_TRUE(refused({{int64_column("x", {1})}, {}}, {"segment 1 holds 0 columns"}));
  EXPECT_TRUE(refused({}, {"at least one segment"}));
  EXPECT_EQ(values_at(unit, {0}), (std::vector<int64_t>{7})) << "the sample put before is untouched";
  EXPECT_EQ(unit.stats().samples, 1u);
}

}  // namespace
}  // namespace seqflow::test
