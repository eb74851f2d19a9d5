// Controller benchmark: get_meta fetch latency as the consumed history grows,
// and the resident memory of the metadata of 1,000,000 live samples.
//
//   seqflow_controller_bench [--quick] [--fetches N] [--json PATH]
//
// 1. Fetch latency. One partition holds 65,536 ready samples x 8 fields
//    (custom_meta {"total_lengths": L} each). get_meta fetches batches of 256
//    for one task through the sequential sampler (polling), and every fetch is
//    followed by a refill of 256 new samples (not timed), so 65,536 stay
//    ready. The consumed samples stay in the partition: the history grows.
//    Rows measure --fetches fetches each (default 350, quick 200) after 0,
//    100,000, 500,000 and 1,000,000 consumed samples (advanced in large
//    batches between rows); p10 / p50 / p99 / mean, and the p50 against the
//    first row. A last, diagnostic row fetches samples without custom_meta.
// 2. Memory, in a fresh child process (this program re-run with
//    --memory-child): resident size before and after 1,000,000 samples x 8
//    fields with custom_meta were inserted and marked produced.
// 3. PASS/FAIL lines: p50 <= 50 us in every row; flat: the last row's p50 at
//    most 1.5x the first's; memory delta under 300 MB.
//
// Timings on shared machines are noisy: read percentiles and ratios. The exit
// status is 0 whatever the targets say (2 on bad arguments).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/json_text.h"
#include "seqflow/controller.h"

namespace {

using Clock = std::chrono::steady_clock;
using seqflow::BatchMeta;
using seqflow::Controller;
using seqflow::FieldSchema;
using seqflow::MetaMode;
using seqflow::MetaRequest;
using seqflow::Value;

constexpr int64_t kReady = 65536;
constexpr int64_t kBatch = 256;
constexpr int64_t kMemorySamples = 1000000;
constexpr int64_t kMemoryPut = 10000;
constexpr double kP50TargetUs = 50.0;
constexpr double kFlatTarget = 1.5;
constexpr double kMemoryTargetMb = 300.0;
const char* const kPartition = "train@global_step_0";
const char* const kTask = "actor_update";
const char* const kFieldNames[] = {"input_ids",    "attention_mask", "position_ids", "responses",
                                   "old_log_prob", "ref_log_prob",   "advantages",   "rewards"};

std::map<std::string, FieldSchema> eight_fields() {
  std::map<std::string, FieldSchema> out;
  for (const char* name : kFieldNames) {
    FieldSchema schema;
    schema.dtype = seqflow::DType::kInt64;
    schema.shape = {8192};
    out.emplace(name, schema);
  }
  return out;
}

// Inserts `count` produced samples (one put call) with small custom_meta.
// Without custom_meta when `with_meta` is false (the diagnostic row).
void put(Controller& controller, const std::map<std::string, FieldSchema>& fields, int64_t count, int64_t& serial,
         bool with_meta = true) {
  const BatchMeta inserted = controller.insert(kPartition, count);
  std::vector<seqflow::Value> meta;
  meta.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; with_meta && i < count; ++i) {
    meta.push_back({{"total_lengths", 100 + (serial++ * 7919) % 16000}});
  }
  controller.mark_produced(kPartition, inserted.global_indexes, inserted.generations, fields, meta);
}

MetaRequest fetch_request(int64_t batch_size) {
  MetaRequest request;
  request.fields = {"input_ids", "old_log_prob", "advantages"};
  request.batch_size = batch_size;
  request.partition_id = kPartition;
  request.mode = MetaMode::kFetch;
  request.task_name = kTask;
  request.polling = true;
  return request;
}

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  const size_t at = std::min(values.size() - 1, static_cast<size_t>(q * static_cast<double>(values.size())));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(at), values.end());
  return values[at];
}

std::string commas(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

// Columns sized to the widest cell; the first left-aligned.
void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line = "  ";
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      line += c == 0 ? row[c] + pad : "  " + pad + row[c];
    }
    std::cout << line << "\n";
  }
}

struct Row {
  int64_t consumed_before = 0;
  int64_t live = 0;
  int64_t fetches = 0;
  double p10 = 0, p50 = 0, p99 = 0, mean = 0;
};

// Times `fetches` fetches of kBatch, each followed by an untimed refill.
Row time_fetches(Controller& controller, const std::map<std::string, FieldSchema>& fields, int64_t& serial,
                 int64_t& consumed, int64_t fetches, bool with_meta) {
  const MetaRequest small = fetch_request(kBatch);
  Row row;
  row.consumed_before = consumed;
  row.live = consumed + kReady;
  for (int w = 0; w < 20; ++w) {  // warm-up
    consumed += static_cast<int64_t>(controller.get_meta(small).size());
    put(controller, fields, kBatch, serial, with_meta);
  }
  std::vector<double> us;
  us.reserve(static_cast<size_t>(fetches));
  for (int64_t f = 0; f < fetches; ++f) {
    const auto start = Clock::now();
    const BatchMeta meta = controller.get_meta(small);
    const std::chrono::duration<double, std::micro> took = Clock::now() - start;
    if (meta.size() != static_cast<size_t>(kBatch)) {
      throw std::runtime_error("a fetch returned " + std::to_string(meta.size()) + " samples, expected " +
                               std::to_string(kBatch));
    }
    us.push_back(took.count());
    consumed += kBatch;
    put(controller, fields, kBatch, serial, with_meta);
  }
  row.fetches = fetches;
  row.p10 = percentile(us, 0.10);
  row.p50 = percentile(us, 0.50);
  row.p99 = percentile(us, 0.99);
  double total = 0;
  for (double u : us) total += u;
  row.mean = total / static_cast<double>(us.size());
  return row;
}

// --memory-child: prints "before after" resident bytes.
int memory_child() {
  const auto fields = eight_fields();
  const int64_t before = resident_bytes();
  Controller controller;
  int64_t serial = 0;
  for (int64_t done = 0; done < kMemorySamples; done += kMemoryPut) put(controller, fields, kMemoryPut, serial);
  const int64_t after = resident_bytes();
  std::cout << before << " " << after << "\n";
  return 0;
}

bool run_memory_child(int64_t& before, int64_t& after) {
  char self[4096];
  const ssize_t length = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) return false;
  self[length] = '\0';
  const std::string command = "'" + std::string(self) + "' --memory-child";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return false;
  long long b = 0, a = 0;
  const int got = std::fscanf(pipe, "%lld %lld", &b, &a);
  const int status = ::pclose(pipe);
  before = b, after = a;
  return got == 2 && status == 0;
}

int usage(const char* message) {
  if (message) std::cerr << "seqflow_controller_bench: error: " << message << "\n";
  std::cerr << "usage: seqflow_controller_bench [--quick] [--fetches N] [--json PATH]\n";
  return 2;
}

int run(int argc, char** argv) {
  bool quick = false;
  int64_t fetches = 0;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--memory-child") return memory_child();
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--fetches" && i + 1 < argc) {
      char* end = nullptr;
      fetches = std::strtoll(argv[++i], &end, 10);
      if (*end != '\0' || fetches < 10) return usage("--fetches must be an integer >= 10");
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "-h" || arg == "--help") {
      usage(nullptr);
      return 0;
    } else {
      return usage(("unknown argument '" + arg + "'").c_str());
    }
  }
  // 350 x 256 < 100,000: a row's own fetches stay short of the next row's history.
  if (fetches == 0) fetches = quick ? 200 : 350;
  const std::vector<int64_t> checkpoints = {0, 100000, 500000, 1000000};

  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  std::cout << "$ " << command << "\n\n";
  std::cout << "Controller benchmark (C++, seqflow::Controller directly, sequential sampler)\n"
            << "fetch: get_meta(fetch, batch " << kBatch << ", polling) from " << commas(kReady)
            << " ready samples x 8 fields, refilled after every fetch; " << fetches << " timed fetches per row\n\n";

  // 1. Fetch latency as the consumed history grows.
  const auto fields = eight_fields();
  Controller controller;
  int64_t serial = 0;
  for (int64_t done = 0; done < kReady; done += 1024) put(controller, fields, 1024, serial);
  const MetaRequest small = fetch_request(kBatch);
  const MetaRequest large = fetch_request(kReady);  // advances the history
  int64_t consumed = 0;
  std::vector<Row> rows;
  for (int64_t target : checkpoints) {
    while (consumed + kReady <= target) {  // advance the history in large batches
      if (controller.get_meta(large).size() != static_cast<size_t>(kReady)) {
        std::cerr << "unexpected short batch while advancing\n";
        return 1;
      }
      consumed += kReady;
      put(controller, fields, kReady, serial);
    }
    while (consumed < target) {
      consumed += static_cast<int64_t>(controller.get_meta(small).size());
      put(controller, fields, kBatch, serial);
    }
    rows.push_back(time_fetches(controller, fields, serial, consumed, fetches, true));
  }
  std::vector<std::vector<std::string>> table = {
      {"consumed before", "live samples", "fetches", "p10 us", "p50 us", "p99 us", "mean us", "p50 vs first row"}};
  for (const Row& row : rows) {
    table.push_back({commas(row.consumed_before), commas(row.live), commas(row.fetches), fixed(row.p10, 1),
                     fixed(row.p50, 1), fixed(row.p99, 1), fixed(row.mean, 1),
                     fixed(row.p50 / rows.front().p50, 2) + "x"});
  }
  // Diagnostic: the same fetch over samples without custom_meta.
  Row bare;
  {
    Controller plain;
    int64_t plain_serial = 0, plain_consumed = 0;
    for (int64_t done = 0; done < kReady; done += 1024) put(plain, fields, 1024, plain_serial, false);
    bare = time_fetches(plain, fields, plain_serial, plain_consumed, fetches, false);
  }
  table.push_back({"(diagnostic) 0, no custom_meta", commas(bare.live), commas(bare.fetches), fixed(bare.p10, 1),
                   fixed(bare.p50, 1), fixed(bare.p99, 1), fixed(bare.mean, 1),
                   fixed(bare.p50 / rows.front().p50, 2) + "x"});
  print_table(table);
  std::cout << "  The diagnostic row is not a target: it shows what carrying custom_meta (encoded, decoded on access) "
               "costs a fetch.\n";

  // 2. Memory in a fresh process.
  int64_t before = 0, after = 0;
  const bool measured = run_memory_child(before, after);
  const double delta_mb = static_cast<double>(after - before) / (1 << 20);
  std::cout << "\nController memory (fresh process): " << commas(kMemorySamples)
            << " live samples x 8 fields, custom_meta {\"total_lengths\": L} each\n";
  if (measured) {
    print_table({{"RSS before MB", "RSS after MB", "delta MB", "bytes per sample", "target MB"},
                 {fixed(static_cast<double>(before) / (1 << 20), 1), fixed(static_cast<double>(after) / (1 << 20), 1),
                  fixed(delta_mb, 1), fixed(static_cast<double>(after - before) / kMemorySamples, 0),
                  fixed(kMemoryTargetMb, 0)}});
  } else {
    std::cout << "  the child process failed\n";
  }

  // 3. Targets.
  double worst_p50 = 0;
  for (const Row& row : rows) worst_p50 = std::max(worst_p50, row.p50);
  const double flat = rows.back().p50 / rows.front().p50;
  std::cout << "\nTargets\n";
  auto line = [](bool ok, const std::string& text) {
    std::cout << "  " << (ok ? "PASS" : "FAIL") << "  " << text << "\n";
  };
  line(worst_p50 <= kP50TargetUs,
       "get_meta fetch of 256 from 65,536 ready x 8 fields: p50 <= 50 us in C++ "
       "(worst row " +
           fixed(worst_p50, 1) + " us)");
  line(flat <= kFlatTarget, "flat as consumed history grows to 1,000,000: p50 at " +
                                commas(rows.back().consumed_before) + " consumed / p50 at 0 = " + fixed(flat, 2) +
                                "x (<= " + fixed(kFlatTarget, 1) + "x)");
  if (measured) {
    line(delta_mb < kMemoryTargetMb,
         "controller metadata of 1,000,000 live samples x 8 fields: " + fixed(delta_mb, 1) + " MB resident (< 300 MB)");
  } else {
    std::cout << "  SKIP  controller memory: the child process failed\n";
  }

  if (!json_path.empty()) {
    Value out = {{"command", command}, {"fetches_per_row", fetches}, {"rows", Value::array()}};
    for (const Row& row : rows) {
      out["rows"].push_back({{"consumed_before", row.consumed_before},
                             {"live", row.live},
                             {"p10_us", row.p10},
                             {"p50_us", row.p50},
                             {"p99_us", row.p99},
                             {"mean_us", row.mean}});
    }
    if (measured) out["memory"] = {{"rss_before", before}, {"rss_after", after}, {"delta_mb", delta_mb}};
    std::ofstream(json_path) << seqflow::json_text(out, 2) << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << "seqflow_controller_bench: error: " << error.what() << "\n";
    return 1;
  }
}
