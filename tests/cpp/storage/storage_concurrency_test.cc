// StorageUnit under real threads: writers over disjoint and overlapping index
// ranges, readers checking that every read is exactly one whole put.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "seqflow/error.h"
#include "seqflow/storage.h"
#include "sample_keys_support.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWriters = 8;
constexpr int kReaders = 8;
constexpr int64_t kRangeSize = 32;
constexpr int64_t kIndexes = 8 * kRangeSize;  // writers 0-3 own a range each; 4-7 share the rest
constexpr auto kDuration = std::chrono::milliseconds(1200);
constexpr uint64_t kSeed = 0x5eedf10eULL;
const std::vector<std::string> kFields = {"tokens", "tag"};

// Writers 0..3 own [w * 32, w * 32 + 32); writers 4..7 all write [128, 256).
int64_t range_begin(int writer) { return writer < 4 ? writer * kRangeSize : 4 * kRangeSize; }
int64_t range_end(int writer) { return writer < 4 ? range_begin(writer) + kRangeSize : kIndexes; }

// The value a writer puts: tokens of a length that depends on (gi, version),
// each element encoding (gi, writer, version, position), and a tag object
// naming the same put, so that a mix of two puts is detectable.
int64_t token_length(int64_t gi, int64_t version) { return 1 + (gi + version) % 17; }
int64_t token(int64_t gi, int writer, int64_t version, int64_t position) {
  return (gi << 44) | (int64_t{writer} << 40) | (version << 8) | position;
}
std::string tag(int64_t gi, int writer, int64_t version) {
  return std::to_string(gi) + ":" + std::to_string(writer) + ":" + std::to_string(version);
}

std::vector<Column> put_columns(std::span<const int64_t> gis, int writer, int64_t version) {
  std::vector<Shape> shapes;
  std::vector<Bytes> tokens;
  std::vector<std::string> tags;
  for (int64_t gi : gis) {
    const int64_t length = token_length(gi, version);
    std::vector<int64_t> values;
    for (int64_t p = 0; p < length; ++p) values.push_back(token(gi, writer, version, p));
    shapes.push_back({length});
    tokens.push_back(bytes_of(values));
    tags.push_back(tag(gi, writer, version));
  }
  return {column_of("tokens", DType::kInt64, shapes, tokens), object_column("tag", tags)};
}

struct Seen {
  int writer = -1;
  int64_t version = -1;
};

// Checks one row [tokens, tag] of `gi` and returns the put it came from; an
// empty Seen (writer -1) when the row mixes puts or was never written.
Seen check_row(int64_t gi, const std::vector<SampleView>& row) {
  const SampleView& tokens = row[0];
  if (tokens.dtype != DType::kInt64 || tokens.shape.size() != 1 || tokens.is_object) return {};
  const int64_t length = tokens.shape[0];
  if (length < 1 || tokens.nbytes != static_cast<size_t>(length) * 8) return {};
  std::vector<int64_t> values(static_cast<size_t>(length));
  std::memcpy(values.data(), tokens.bytes().data(), tokens.nbytes);
  const int writer = static_cast<int>((values[0] >> 40) & 0xf);
  const int64_t version = (values[0] >> 8) & ((int64_t{1} << 32) - 1);
  if (gi < range_begin(writer) || gi >= range_end(writer)) return {};
  if (length != token_length(gi, version)) return {};
  for (int64_t p = 0; p < length; ++p) {
    if (values[p] != token(gi, writer, version, p)) return {};
  }
  if (!row[1].is_object || text_of(row[1]) != tag(gi, writer, version)) return {};
  return {writer, version};
}

TEST(StorageConcurrency, EveryReadIsOneWholePut) {
  StorageUnit unit;
  const auto deadline = Clock::now() + kDuration;
  std::atomic<int64_t> versions_started[kWriters] = {};
  // What the owners of disjoint ranges stored last: gi -> version, or -1 when cleared.
  std::map<int64_t, int64_t> last_owned;
  std::mutex last_owned_mutex;
  std::atomic<int64_t> puts{0}, reads{0}, rows{0}, misses{0}, bad_rows{0}, regressions{0};

  auto writer_loop = [&](int writer) {
    std::mt19937_64 rng(kSeed + writer);
    std::map<int64_t, int64_t> mine;
    const int64_t begin = range_begin(writer);
    const int64_t span = range_end(writer) - begin;
    for (int64_t version = 0; Clock::now() < deadline; ++version) {
      versions_started[writer].store(version + 1);
      std::vector<int64_t> gis;
      const int64_t count = 1 + static_cast<int64_t>(rng() % 6);
      for (int64_t start = begin + static_cast<int64_t>(rng() % span), k = 0; k < count; ++k) {
        gis.push_back(begin + (start - begin + k * 5) % span);  // distinct: 5 is coprime to 32 and 128
      }
      unit.put(samples_of(gis), put_columns(gis, writer, version));
      for (int64_t gi : gis) mine[gi] = version;
      ++puts;
      if (version % 8 == 7) {
        const int64_t victim = gis[rng() % gis.size()];
        unit.clear(std::span(&victim, 1));
        mine[victim] = -1;
      }
    }
    if (writer < 4) {
      std::lock_guard lock(last_owned_mutex);
      last_owned.insert(mine.begin(), mine.end());
    }
  };

  auto reader_loop = [&](int reader) {
    std::mt19937_64 rng(kSeed * 31 + reader);
    std::vector<int64_t> newest(kIndexes, -1);  // per owned index: versions never go back
    while (Clock::now() < deadline) {
      std::vector<int64_t> gis;
      const size_t count = 1 + rng() % 4;
      for (size_t k = 0; k < count; ++k) gis.push_back(static_cast<int64_t>(rng() % kIndexes));
      std::vector<std::vector<SampleView>> got;
      try {
        got = unit.get(samples_of(gis), kFields);
      } catch (const Error& error) {
        ++(error.code() == ErrorCode::kStaleSample ? misses : bad_rows);  // missing: not written yet, or cleared
        continue;
      }
      ++reads;
      for (size_t k = 0; k < gis.size(); ++k) {
        const Seen seen = check_row(gis[k], got[k]);
        ++rows;
        if (seen.writer < 0 || seen.version >= versions_started[seen.writer].load()) {
          ++bad_rows;
          continue;
        }
        if (seen.writer < 4) {
          if (seen.version < newest[gis[k]]) ++regressions;
          newest[gis[k]] = std::max(newest[gis[k]], seen.version);
        }
      }
      const StorageStats stats = unit.stats();
      if (stats.samples > static_cast<uint64_t>(kIndexes)) ++bad_rows;
    }
  };

  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) threads.emplace_back(writer_loop, w);
  for (int r = 0; r < kReaders; ++r) threads.emplace_back(reader_loop, r);
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(bad_rows.load(), 0) << "reads that were not exactly one put";
  EXPECT_EQ(regressions.load(), 0) << "reads older than an earlier read of the same index";
  EXPECT_GT(puts.load(), 100) << "writers starved by readers";
  EXPECT_GT(reads.load(), 100) << "readers starved by writers";
  RecordProperty("puts", std::to_string(puts.load()));
  RecordProperty("reads", std::to_string(reads.load()));

  // The disjoint ranges hold exactly their owner's last writes.
  for (const auto& [gi, version] : last_owned) {
    const int64_t one[] = {gi};
    if (version < 0) {
      EXPECT_TRUE(throws_error(ErrorCode::kStaleSample, [&] { unit.get(samples_of(one), kFields); }, {})) << gi;
      continue;
    }
    const Seen seen = check_row(gi, unit.get(samples_of(one), kFields)[0]);
    EXPECT_EQ(seen.version, version) << "global index " << gi;
  }
  // Byte accounting matches what is stored.
  uint64_t bytes = 0;
  uint64_t samples = 0;
  for (int64_t gi = 0; gi < kIndexes; ++gi) {
    const int64_t one[] = {gi};
    if (error_of([&] { unit.get(samples_of(one), kFields); })) continue;
    const auto row = unit.get(samples_of(one), kFields)[0];
    EXPECT_GE(check_row(gi, row).writer, 0) << gi;
    bytes += row[0].nbytes + row[1].nbytes;
    ++samples;
  }
  EXPECT_EQ(unit.stats().bytes, bytes);
  EXPECT_EQ(unit.stats().samples, samples);
}

// Saves taken while writers run hold only whole puts, and load back whole.
TEST(StorageConcurrency, CheckpointsWhileWritingHoldWholePuts) {
  StorageUnit unit;
  TempDir dir;
  const auto deadline = Clock::now() + std::chrono::milliseconds(500);
  std::atomic<int64_t> saves{0}, bad_rows{0};
  auto writer_loop = [&](int writer) {
    for (int64_t version = 0; Clock::now() < deadline; ++version) {
      const int64_t gis[] = {range_begin(writer) + version % kRangeSize,
                             range_begin(writer) + (version + 7) % kRangeSize};
      unit.put(samples_of(gis), put_columns(gis, writer, version));
    }
  };
  auto saver_loop = [&] {
    const std::string path = dir.file("live.ckpt");
    while (Clock::now() < deadline) {
      unit.save(path);
      StorageUnit loaded;
      loaded.load(path);
      for (int64_t gi = 0; gi < 2 * kRangeSize; ++gi) {
        const int64_t one[] = {gi};
        if (error_of([&] { loaded.get(samples_of(one), kFields); })) continue;
        if (check_row(gi, loaded.get(samples_of(one), kFields)[0]).writer < 0) ++bad_rows;
      }
      ++saves;
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(writer_loop, 0);
  threads.emplace_back(writer_loop, 1);
  threads.emplace_back(saver_loop);
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(bad_rows.load(), 0);
  EXPECT_GT(saves.load(), 0);
}

}  // namespace
}  // namespace seqflow::test
