// Blocked fetches cost memory, not threads: the controller service with
// 10,000 get_meta requests waiting on a partition that gets no data, beside
// the same service with none. One process: the services run on their own
// threads (the code `seqflow serve` runs); the waiters are pipelined on a
// few raw connections.
//
//   seqflow_waiters_bench [--waiters N] [--calls N]
//
// Rows: the process's resident memory and threads, and the round trip of an
// unrelated get_meta (a batch of 16 ready samples of another partition,
// refilled untimed) with no waiter, with N waiters, and with none again
// after they are answered: the two rows without waiters are the noise floor.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "remote_cluster.h"
#include "seqflow/client.h"
#include "transport/connection.h"
#include "transport/wire_codec.h"

namespace {

using namespace seqflow;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int64_t kBatch = 16;
constexpr size_t kRequestsPerConnection = 4000;  // below Connection's pending-request cap

// A field of /proc/self/status ("VmRSS:", "Threads:"), its first number.
long status_field(const std::string& name) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(name, 0) == 0) return std::strtol(line.c_str() + name.size(), nullptr, 10);
  }
  return -1;
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(p * static_cast<double>(values.size() - 1))];
}

// `samples` int64 values of 1, field "x".
Column int64_ones(size_t samples) {
  Column column;
  column.field = "x";
  column.dtype = DType::kInt64;
  column.shapes = {{1}};
  const std::vector<std::byte> bytes(samples * sizeof(int64_t), std::byte{1});
  for (size_t i = 0; i <= samples; ++i) column.offsets.push_back(i * sizeof(int64_t));
  column.buffer = Buffer::copy_of(bytes);
  return column;
}

MetaRequest fetch(const std::string& partition, int64_t batch, bool polling) {
  MetaRequest request;
  request.fields = {"x"};
  request.batch_size = batch;
  request.partition_id = partition;
  request.task_name = "train";
  request.polling = polling;
  request.timeout = 600s;
  return request;
}

struct Row {
  std::string what;
  size_t waiters = 0;
  long rss_kib = 0;
  long threads = 0;
  double p50_us = 0;
  double p99_us = 0;
};

// `calls` fetches from "busy", refilled (untimed) when it runs dry.
Row measure(const std::string& what, size_t waiters, Client& client, int calls) {
  std::vector<double> us;
  const Column refill = int64_ones(kBatch * 64);
  for (int c = 0; c < calls; ++c) {
    if (c % 64 == 0) client.put_new("busy", {refill}, {});
    const auto start = Clock::now();
    const BatchMeta meta = client.get_meta(fetch("busy", kBatch, true));
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    if (meta.size() != kBatch) std::fprintf(stderr, "fetch returned %zu samples\n", meta.size());
    client.clear_samples("busy", meta.global_indexes, meta.generations);
  }
  return Row{
      what, waiters, status_field("VmRSS:"), status_field("Threads:"), percentile(us, 0.5), percentile(us, 0.99)};
}

}  // namespace

int main(int argc, char** argv) {
  size_t waiter_count = 10000;
  int calls = 2000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--waiters" && i + 1 < argc) {
      waiter_count = std::strtoul(argv[++i], nullptr, 10);
    } else if (arg == "--calls" && i + 1 < argc) {
      calls = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--waiters N] [--calls N]\n", argv[0]);
      return 2;
    }
  }
  test::RemoteCluster cluster(1);
  auto client = cluster.client();
  std::vector<Row> rows;
  rows.push_back(measure("no waiter", 0, *client, calls));

  zmq::context_t context;
  std::vector<std::unique_ptr<transport::Connection>> connections;
  std::vector<std::pair<transport::Connection*, uint64_t>> pending;
  const auto deadline = Clock::now() + 600s;
  const transport::Frames request =
      transport::wire::header_message(transport::wire::meta_request_frame(fetch("idle", 1, false)));
  for (size_t w = 0; w < waiter_count; ++w) {
    if (w % kRequestsPerConnection == 0) {
      connections.push_back(std::make_unique<transport::Connection>(
          context, cluster.controller_endpoint(), transport::ConnectionOptions{.timeout = 600s, .security = {}}));
    }
    transport::Frames copy;
    for (const auto& frame : request) copy.emplace_back(frame.data(), frame.size());
    pending.emplace_back(connections.back().get(), connections.back()->send("get_meta", std::move(copy), deadline));
  }
  auto& deferred = cluster.controller().metrics().gauge("seqflow_requests_deferred", "");
  const auto registering = Clock::now();
  while (deferred.value() < static_cast<double>(waiter_count) && Clock::now() - registering < 120s) {
    std::this_thread::sleep_for(10ms);
  }
  if (deferred.value() < static_cast<double>(waiter_count)) {
    std::fprintf(stderr, "only %.0f of %zu waiters registered\n", deferred.value(), waiter_count);
    return 1;
  }
  rows.push_back(measure("waiters on another partition", waiter_count, *client, calls));

  // Data for every waiter; each gets one sample.
  const auto answering = Clock::now();
  client->put_new("idle", {int64_ones(waiter_count)}, {});
  size_t answered = 0;
  for (auto& [connection, id] : pending) {
    if (transport::wire::read_batch_meta(connection->receive(id, deadline), 0, "reply").size() == 1) ++answered;
  }
  const double answer_seconds = std::chrono::duration<double>(Clock::now() - answering).count();
  rows.push_back(measure("no waiter (after)", 0, *client, calls));

  std::printf("seqflow waiters benchmark: controller and storage services in this process, %u hardware threads\n",
              std::thread::hardware_concurrency());
  std::printf("%-30s %8s %10s %8s %10s %10s\n", "", "waiters", "RSS MiB", "threads", "p50 us", "p99 us");
  for (const Row& row : rows) {
    std::printf("%-30s %8zu %10.1f %8ld %10.1f %10.1f\n", row.what.c_str(), row.waiters,
                static_cast<double>(row.rss_kib) / 1024.0, row.threads, row.p50_us, row.p99_us);
  }
  const double floor = std::abs(rows[2].p50_us - rows[0].p50_us);
  std::printf("memory per waiter: %.1f KiB (process RSS, client side included)\n",
              static_cast<double>(rows[1].rss_kib - rows[0].rss_kib) / static_cast<double>(waiter_count));
  std::printf(
      "unrelated get_meta p50 with waiters / without: %.2f (noise floor: the two rows without waiters "
      "differ by %.1f us)\n",
      rows[1].p50_us / rows[0].p50_us, floor);
  std::printf("%zu of %zu waiters answered by one put, in %.2f s\n", answered, waiter_count, answer_seconds);
  return 0;
}
