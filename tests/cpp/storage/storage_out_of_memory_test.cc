// A storage call that runs out of memory at any of its allocations changes
// nothing, counts included: each call below runs with its 1st, 2nd, 3rd, ...
// allocation failing until it completes, and after every failure the unit's
// values, stats and per-partition counts are what they were.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "failing_allocations.h"
#include "sample_keys_support.h"
#include "seqflow/storage.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

constexpr int64_t kHeld = 40;  // global indexes 0 .. kHeld - 1 may hold values

// Each sample's value names its global index.
void put_numbered(StorageUnit& unit, int64_t begin, int64_t end, const std::string& partition) {
  const std::vector<int64_t> gis = index_range(begin, end);
  std::vector<std::string> objects;
  for (const int64_t gi : gis) objects.push_back("value " + std::to_string(gi));
  unit.put(samples_of(gis, 1, partition), {object_column("x", objects)});
}

// Counting per partition (a per-partition limit far from full).
StorageOptions counted() { return {.max_samples_per_partition = 1000}; }

// What a call may change: the values of every index, the stats and the
// per-partition counts.
std::string snapshot(const StorageUnit& unit) {
  std::string out;
  for (const int64_t gi : index_range(0, kHeld)) {
    const int64_t one[] = {gi};
    for (const char* partition : {"p", "q", "a", "b"}) {
      try {
        out += std::to_string(gi) + partition + "=" +
               text_of(unit.get(samples_of(one, 1, partition), std::vector<std::string>{"x"})[0][0]) + ";";
      } catch (const Error&) {
        // not held, or another partition's
      }
    }
  }
  const StorageStats stats = unit.stats();
  out += " samples " + std::to_string(stats.samples) + " bytes " + std::to_string(stats.bytes) + " overhead " +
         std::to_string(stats.overhead_bytes);
  std::vector<StorageUnit::PartitionUsage> usage = unit.partition_usage();
  std::sort(usage.begin(), usage.end(), [](const auto& a, const auto& b) { return a.partition < b.partition; });
  uint64_t samples = 0;
  uint64_t bytes = 0;
  for (const auto& partition : usage) {
    out += " " + partition.partition + ":" + std::to_string(partition.samples) + "/" + std::to_string(partition.bytes);
    samples += partition.samples;
    bytes += partition.bytes;
  }
  // The counts agree with the content.
  EXPECT_EQ(samples, stats.samples) << out;
  EXPECT_EQ(bytes, stats.bytes + stats.overhead_bytes) << out;
  return out;
}

// Runs `call` on a unit made by `make`, with its n-th allocation failing,
// for n = 1, 2, ... until it allocates fewer times than n; every call that
// raised must have left the unit as it was. Returns how many raised.
size_t fail_each_allocation(const std::function<void(StorageUnit&)>& make,
                            const std::function<void(StorageUnit&)>& call) {
  size_t raised = 0;
  for (size_t nth = 1;; ++nth) {
    StorageUnit unit(counted());
    make(unit);
    const std::string before = snapshot(unit);
    const auto attempt = with_nth_allocation_failing(nth, [&] { call(unit); });
    if (!attempt.fired) return raised;
    if (!attempt.raised) continue;
    ++raised;
    EXPECT_EQ(snapshot(unit), before) << "allocation " << nth << " failed and left a change";
    if (::testing::Test::HasFailure()) return raised;
  }
}

void hold_one(StorageUnit& unit) { put_numbered(unit, 0, 1, "p"); }

// Enough new samples that the unit's index grows (a rehash) under its lock.
TEST(StorageOutOfMemory, APutOfManySamplesChangesNothing) {
  EXPECT_GT(fail_each_allocation(hold_one, [](StorageUnit& unit) { put_numbered(unit, 1, 31, "p"); }), 5u);
}

TEST(StorageOutOfMemory, APutIntoANewPartitionChangesNothing) {
  EXPECT_GT(fail_each_allocation(hold_one, [](StorageUnit& unit) { put_numbered(unit, 1, 3, "q"); }), 2u);
}

TEST(StorageOutOfMemory, ALoadChangesNothing) {
  TempDir dir;
  const std::string path = dir.file("checkpoint");
  {
    StorageUnit source;
    put_numbered(source, 10, 12, "a");
    put_numbered(source, 12, 15, "b");
    source.save(path);
  }
  EXPECT_GT(fail_each_allocation(hold_one, [&](StorageUnit& unit) { unit.load(path); }), 5u);
}

}  // namespace
}  // namespace seqflow::test
