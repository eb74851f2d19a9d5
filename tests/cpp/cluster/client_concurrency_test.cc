// The client under threads, embedded and remote (one or three storage
// units): concurrent puts, fetches and clears never mix up samples.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client_test_support.h"
#include "controller_test_support.h"
#include "seqflow/client.h"
#include "storage_test_support.h"

namespace seqflow::test {
namespace {

// Producers put while a consumer fetches and clears what it consumed, so
// global indexes are reused all the time: every fetched sample must still
// carry its own value.
TEST_P(ClientModes, ConcurrentPutsFetchesAndClearsKeepSamplesApart) {
  auto client = make_client();
  constexpr int kProducers = 3;
  constexpr int kBatches = 40;
  constexpr int kBatch = 4;
  std::vector<std::jthread> producers;  // joined even when an assertion returns early
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int b = 0; b < kBatches; ++b) {
        std::vector<int64_t> values;
        std::vector<Value> metas;
        for (int i = 0; i < kBatch; ++i) {
          const int64_t id = (p * kBatches + b) * kBatch + i;
          values.push_back(id);
          metas.push_back({{"id", id}});
        }
        client->put_new("p", {int64_column("x", values)}, metas);
      }
    });
  }
  std::set<int64_t> seen;
  const std::string fields[] = {"x"};
  while (seen.size() < static_cast<size_t>(kProducers * kBatches * kBatch)) {
    BatchMeta meta;
    try {
      meta = client->get_meta(fetch_request("p", "train", {"x"}, 3));
    } catch (const Error& e) {
      // The consumer may start before the first put has created the partition.
      ASSERT_EQ(e.code(), ErrorCode::kNotFound) << e.what();
    }
    if (meta.size() == 0) {
      std::this_thread::yield();
      continue;
    }
    const auto rows = client->get_data(meta, fields);
    for (size_t i = 0; i < meta.size(); ++i) {
      const int64_t id = meta.custom_meta[i]["id"].as_int();
      ASSERT_EQ(int64_of(rows[i][0]), id);
      ASSERT_TRUE(seen.insert(id).second) << "sample " << id << " delivered twice";
    }
    client->clear_samples("p", meta.global_indexes, {});
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(client->storage_stats().samples, 0u);
}

}  // namespace
}  // namespace seqflow::test
