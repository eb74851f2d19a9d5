// Shared by the same-host copy tests (local_copy_test.cc and
// local_copy_concurrency_test.cc): random frames, large float columns, the
// storage units' local-copy counters and the cluster fixture.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/aligned_buffer.h"
#include "remote_cluster.h"
#include "seqflow/storage.h"
#include "transport/frames.h"

namespace seqflow::test {

inline std::shared_ptr<const Buffer> random_buffer(size_t size, uint32_t seed) {
  WritableBuffer out = allocate_buffer(size);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < size; ++i) out.data[i] = static_cast<std::byte>(rng());
  return std::move(out.buffer);
}

// Frames 1.. of the given sizes, random bytes each; frame 0 stands for a header.
inline transport::Frames data_frames(std::initializer_list<size_t> sizes) {
  transport::Frames frames(1);
  uint32_t seed = 1;
  for (const size_t size : sizes) frames.push_back(transport::frame_of(random_buffer(size, seed++), 0, size));
  return frames;
}

// float32 samples of `width` values each; sample i holds i * width + j.
inline Column wide_column(const std::string& field, size_t samples, size_t width) {
  std::vector<float> values(samples * width);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  Column column;
  column.field = field;
  column.dtype = DType::kFloat32;
  column.shapes = {{static_cast<int64_t>(width)}};
  for (size_t i = 0; i <= samples; ++i) column.offsets.push_back(i * width * sizeof(float));
  column.buffer = Buffer::copy_of(std::as_bytes(std::span<const float>(values)));
  return column;
}

// Bytes the cluster's storage units moved through memory in `direction` ("put" or "get").
inline double local_copy_bytes(RemoteCluster& cluster, const std::string& direction) {
  double total = 0;
  for (size_t u = 0; u < cluster.unit_count(); ++u) {
    total += cluster.unit(u)
                 .metrics()
                 .counter("seqflow_storage_local_copy_bytes_total", "", {{"direction", direction}})
                 .value();
  }
  return total;
}

// A RemoteCluster of this many storage units per test; one file of each test
// executable (cluster/local_copy_test.cc) instantiates it with
// INSTANTIATE_TEST_SUITE_P(Units, LocalCopyCluster, ::testing::ValuesIn(kLocalCopyUnitCounts)):
// a second instantiation in the same executable would run every test twice.
inline constexpr size_t kLocalCopyUnitCounts[] = {1, 3};

class LocalCopyCluster : public ::testing::TestWithParam<size_t> {};

}  // namespace seqflow::test
