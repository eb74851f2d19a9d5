// Rollout writes variable-length responses into an embedded seqflow; the
// trainer fetches them and splits them over data-parallel ranks with equal
// token load. Only headers from include/seqflow/ are used.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "seqflow/balance.h"
#include "seqflow/client.h"
#include "seqflow/error.h"

namespace {

// One int64 token-id row per sample, sample i holding lengths[i] tokens.
seqflow::Column responses(const std::vector<int64_t>& lengths) {
  seqflow::Column column;
  column.field = "responses";
  column.dtype = seqflow::DType::kInt64;
  std::vector<int64_t> tokens;
  column.offsets.push_back(0);
  for (const int64_t length : lengths) {
    column.shapes.push_back({length});
    for (int64_t t = 0; t < length; ++t) tokens.push_back(t);
    column.offsets.push_back(tokens.size() * sizeof(int64_t));
  }
  column.buffer = seqflow::Buffer::copy_of(std::as_bytes(std::span(tokens)));
  return column;
}

}  // namespace

int main() {
  try {
    auto client = seqflow::make_embedded_client({}, {});
    const std::vector<int64_t> lengths = {900, 40, 610, 75, 300, 1200, 33, 480};
    const std::vector<Value> no_meta(lengths.size(), Value::object());
    client->put_new("step-0", {responses(lengths)}, no_meta);

    seqflow::MetaRequest request;
    request.fields = {"responses"};
    request.batch_size = static_cast<int64_t>(lengths.size());
    request.partition_id = "step-0";
    request.task_name = "actor_update";
    const seqflow::BatchMeta batch = client->get_meta(request);
    const std::vector<std::string> fields = {"responses"};
    const auto values = client->get_data(batch, fields);

    std::vector<int64_t> fetched_lengths;
    for (const auto& sample : values) fetched_lengths.push_back(sample[0].shape.at(0));
    const seqflow::balance::Partition plan = seqflow::balance::partition(fetched_lengths, 2);
    int64_t planned = 0;
    for (size_t rank = 0; rank < plan.parts.size(); ++rank) {
      std::printf("rank %zu: %zu samples, %lld tokens\n", rank, plan.parts[rank].size(),
                  static_cast<long long>(plan.sums[rank]));
      planned += plan.sums[rank];
    }
    int64_t written = 0;
    for (const int64_t length : lengths) written += length;
    return planned == written ? 0 : 1;  // every token written was fetched and planned
  } catch (const seqflow::Error& error) {
    std::fprintf(stderr, "seqflow error: %s\n", error.what());
    return 1;
  }
}
