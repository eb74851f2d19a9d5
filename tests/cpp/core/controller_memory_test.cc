// Metadata of 1,000,000 live samples x 8 fields, each with a small
// custom_meta, must stay under 300 MB resident. Skipped under sanitizers,
// whose shadow memory and redzones make resident size meaningless.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "controller_test_support.h"
#include "seqflow/controller.h"

namespace seqflow {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

TEST(ControllerMemory, MillionSamplesEightFieldsUnder300MB) {
  if (kSanitized) GTEST_SKIP() << "resident size is meaningless under sanitizers";
  constexpr int64_t kSamples = 1000000;
  constexpr int64_t kPut = 10000;
  const auto fields = test::fields_of({"input_ids", "attention_mask", "position_ids", "responses", "old_log_prob",
                                       "ref_log_prob", "advantages", "rewards"});
  const int64_t before = resident_bytes();
  Controller controller;
  for (int64_t done = 0; done < kSamples; done += kPut) {
    const BatchMeta inserted = controller.insert("train@global_step_12", kPut);
    std::vector<Value> meta;
    meta.reserve(kPut);
    for (int64_t i = 0; i < kPut; ++i) meta.push_back({{"total_lengths", 1000 + (done + i) % 3000}});
    controller.mark_produced("train@global_step_12", inserted.global_indexes, {}, fields, meta);
  }
  // Consumption state of three tasks, half consumed each.
  for (const char* task : {"actor", "ref", "critic"}) {
    const MetaRequest request = test::fetch_request("train@global_step_12", task, {"input_ids"}, kPut);
    for (int64_t done = 0; done < kSamples / 2; done += kPut) controller.get_meta(request);
  }
  const int64_t used = resident_bytes() - before;
  RecordProperty("resident_mb", static_cast<int>(used >> 20));
  std::printf("[ memory ] 1M samples x 8 fields, 3 tasks: %lld MB resident\n", static_cast<long long>(used >> 20));
  EXPECT_LT(used, int64_t{300} << 20);
}

}  // namespace
}  // namespace seqflow
