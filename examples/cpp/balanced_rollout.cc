// Rollout writes variable-length responses into seqflow; the trainer fetches
// them and splits them over data-parallel ranks with equal token load. Once
// with an embedded client, once with a remote client of a controller and a
// storage service started in this process (server.h). Only headers from
// include/seqflow/ are used.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "seqflow/balance.h"
#include "seqflow/client.h"
#include "seqflow/error.h"
#include "seqflow/server.h"
#include "seqflow/value.h"

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

// Puts the responses with their lengths as custom_meta, fetches them back and
// plans the ranks; true when every token written was fetched and planned.
bool rollout_and_plan(seqflow::Client& client, const char* mode) {
  const std::vector<int64_t> lengths = {900, 40, 610, 75, 300, 1200, 33, 480};
  std::vector<seqflow::Value> meta;
  for (const int64_t length : lengths) meta.push_back(seqflow::Value{{"total_lengths", length}});
  client.put_new("step-0", {responses(lengths)}, meta);

  seqflow::MetaRequest request;
  request.fields = {"responses"};
  request.batch_size = static_cast<int64_t>(lengths.size());
  request.partition_id = "step-0";
  request.task_name = "actor_update";
  const seqflow::BatchMeta batch = client.get_meta(request);
  const std::vector<std::string> fields = {"responses"};
  const auto values = client.get_data(batch, fields);

  std::vector<int64_t> fetched_lengths;
  bool meta_matches = true;
  for (size_t i = 0; i < values.size(); ++i) {
    fetched_lengths.push_back(values[i][0].shape.at(0));
    meta_matches = meta_matches && batch.custom_meta[i].at("total_lengths").as_int() == fetched_lengths.back();
  }
  const seqflow::balance::Partition plan = seqflow::balance::partition(fetched_lengths, 2);
  int64_t planned = 0;
  for (size_t rank = 0; rank < plan.parts.size(); ++rank) {
    std::printf("%s rank %zu: %zu samples, %lld tokens\n", mode, rank, plan.parts[rank].size(),
                static_cast<long long>(plan.sums[rank]));
    planned += plan.sums[rank];
  }
  int64_t written = 0;
  for (const int64_t length : lengths) written += length;
  return meta_matches && planned == written;
}

}  // namespace

int main() {
  try {
    auto embedded = seqflow::make_embedded_client({}, {});
    if (!rollout_and_plan(*embedded, "embedded")) return 1;

    seqflow::ControllerServer controller({});  // tcp://127.0.0.1, a free port
    seqflow::StorageServerOptions unit_options;
    unit_options.controller_endpoint = controller.endpoint();
    seqflow::StorageServer unit(unit_options);
    seqflow::RemoteOptions remote;
    remote.controller_endpoint = controller.endpoint();
    auto client = seqflow::make_remote_client(remote);
    return rollout_and_plan(*client, "remote") ? 0 : 1;
  } catch (const seqflow::Error& error) {
    std::fprintf(stderr, "seqflow error: %s\n", error.what());
    return 1;
  }
}
