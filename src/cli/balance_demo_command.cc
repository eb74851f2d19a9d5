// seqflow balance-demo: a GRPO batch split over DP ranks three ways, under
// two workload models, to show what balancing buys by the models' costs (the
// repository's examples/demo trains and times the splits for real).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <numbers>
#include <random>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/table.h"
#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace seqflow::cli {

namespace {

constexpr int64_t kMinPrompt = 100;
constexpr int64_t kMaxPrompt = 1500;
constexpr double kMedianResponse = 1500.0;
constexpr double kResponseSigma = 1.0;
constexpr int64_t kMaxResponse = 16384;
constexpr int64_t kMaxSequences = 10'000'000;

constexpr Option kOptions[] = {
    {"--prompts", "N", "prompts in the batch, a multiple of --ranks (default 512)"},
    {"--responses", "N", "responses per prompt, the GRPO group size (default 8)"},
    {"--ranks", "N", "data-parallel ranks to split the batch over (default 64)"},
    {"--seed", "S",
     "seed of the length generator, >= 0 (default 0); the same seed gives the same "
     "batch and plans on every machine"},
};

constexpr CommandSpec kSpec{
    "balance-demo",
    "balance-demo [--prompts N] [--responses N] [--ranks N] [--seed S]",
    "Generate a GRPO batch -- prompt lengths uniform in 100..1500 tokens, response\n"
    "lengths long-tailed (lognormal, median 1500, sigma 1.0, capped at 16384) -- and\n"
    "split it over DP ranks, each prompt's responses kept on one rank, three ways:\n"
    "  contiguous  prompts in arrival order, the same count per rank (a plain DataLoader)\n"
    "  kk (verl)   Karmarkar-Karp largest differencing, the same prompt count per rank\n"
    "  auto        seqflow's best plan, the same prompt count per rank\n"
    "It prints, for the tokens and the verl (24576*L + L*L) workload models, the\n"
    "heaviest rank, the mean, and the idle time 1 - mean/heaviest: the share of each\n"
    "step that ranks spend waiting for the slowest one.",
    kOptions,
    "",
    "seqflow balance-demo --prompts 256 --ranks 32 --seed 7",
};

struct Batch {
  std::vector<int64_t> lengths;  // prompt-major: prompt p's responses are items p*R .. p*R+R-1
  std::vector<int64_t> groups;   // the prompt of each item
  int64_t prompts = 0;
  int64_t responses = 0;
};

// std::mt19937_64 is the same everywhere, the standard distributions are not
// (each library implements its own), so values are drawn from it by hand.
class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}

  // Uniform in [lo, hi]; draws above the last whole multiple of the range are
  // rejected so every value is equally likely.
  int64_t uniform_int(int64_t lo, int64_t hi) {
    const uint64_t range = static_cast<uint64_t>(hi - lo) + 1;
    constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
    const uint64_t accepted = kMax - kMax % range;
    uint64_t draw = engine_();
    while (draw >= accepted) draw = engine_();
    return lo + static_cast<int64_t>(draw % range);
  }

  // Uniform in (0, 1), from the top 53 bits of one draw.
  double uniform_open() { return (static_cast<double>(engine_() >> 11) + 0.5) * 0x1.0p-53; }

  // Standard normal (Box-Muller).
  double normal() {
    const double radius = std::sqrt(-2.0 * std::log(uniform_open()));
    return radius * std::cos(2.0 * std::numbers::pi * uniform_open());
  }

 private:
  std::mt19937_64 engine_;
};

Batch make_grpo_batch(int64_t prompts, int64_t responses, uint64_t seed) {
  Random random(seed);
  Batch batch{{}, {}, prompts, responses};
  batch.lengths.reserve(static_cast<size_t>(prompts * responses));
  batch.groups.reserve(static_cast<size_t>(prompts * responses));
  for (int64_t p = 0; p < prompts; ++p) {
    const int64_t prompt = random.uniform_int(kMinPrompt, kMaxPrompt);
    for (int64_t r = 0; r < responses; ++r) {
      const double drawn = kMedianResponse * std::exp(kResponseSigma * random.normal());
      const int64_t response = std::clamp<int64_t>(std::llround(drawn), 1, kMaxResponse);
      batch.lengths.push_back(prompt + response);
      batch.groups.push_back(p);
    }
  }
  return batch;
}

struct Split {
  std::string method;
  std::vector<int64_t> loads;  // workload per rank
  double milliseconds = 0;

  int64_t heaviest() const { return *std::max_element(loads.begin(), loads.end()); }
  double mean() const {
    double total = 0;
    for (int64_t load : loads) total += static_cast<double>(load);
    return total / static_cast<double>(loads.size());
  }
  double idle() const { return 1.0 - mean() / static_cast<double>(heaviest()); }
};

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count();
}

// Prompts in arrival order, the same number to each rank.
Split contiguous_split(const Batch& batch, const Workload& workload, int64_t ranks) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t> costs = workload.costs(batch.lengths, "lengths");
  const auto items_per_rank = static_cast<size_t>(batch.prompts / ranks * batch.responses);
  Split split{"contiguous", std::vector<int64_t>(static_cast<size_t>(ranks), 0), 0};
  for (size_t i = 0; i < costs.size(); ++i) split.loads[i / items_per_rank] += costs[i];
  split.milliseconds = milliseconds_since(start);
  return split;
}

Split balanced_split(std::string method, const Batch& batch, const Workload& workload, int64_t ranks,
                     balance::Algorithm algorithm) {
  balance::Options options;
  options.cardinality = balance::Cardinality::kEqual;
  options.workload = workload;
  options.algorithm = algorithm;
  options.groups = batch.groups;
  const auto start = std::chrono::steady_clock::now();
  balance::Partition plan = balance::partition(batch.lengths, ranks, options);
  return Split{std::move(method), std::move(plan.sums), milliseconds_since(start)};
}

// Prints the three splits under one workload model; returns them.
std::vector<Split> compare(const Batch& batch, const Workload& workload, int64_t ranks, std::string_view title) {
  std::vector<Split> splits = {
      contiguous_split(batch, workload, ranks),
      balanced_split("kk (verl)", batch, workload, ranks, balance::Algorithm::kKK),
      balanced_split("auto", batch, workload, ranks, balance::Algorithm::kAuto),
  };
  std::cout << "\n" << title << "\n";
  Table table({"method", "heaviest rank", "mean", "heaviest/mean", "idle", "plan ms"});
  for (const Split& split : splits) {
    table.add_row({split.method, with_commas(split.heaviest()), with_commas(split.mean(), 0),
                   fixed(static_cast<double>(split.heaviest()) / split.mean(), 3) + "x", percent(split.idle(), 2),
                   fixed(split.milliseconds, 2)});
  }
  table.print(std::cout, 2);
  return splits;
}

}  // namespace

int run_balance_demo(std::span<const std::string> arguments) {
  const std::optional<Arguments> args = parse_arguments(arguments, kSpec);
  if (!args) return 0;
  if (!args->positionals().empty()) {
    throw_invalid("unexpected argument '" + args->positionals().front() + "'; balance-demo takes only options");
  }
  const int64_t prompts = args->integer("--prompts", 512, 1, kMaxSequences);
  const int64_t responses = args->integer("--responses", 8, 1, kMaxSequences);
  const int64_t ranks = args->integer("--ranks", 64, 1, kMaxSequences);
  const int64_t seed = args->integer("--seed", 0, 0, std::numeric_limits<int64_t>::max());
  if (prompts % ranks != 0) {
    throw_invalid("--prompts (" + std::to_string(prompts) + ") must be a multiple of --ranks (" +
                  std::to_string(ranks) + ") so every rank gets the same number of prompts");
  }
  if (prompts * responses > kMaxSequences) {
    throw_invalid("--prompts x --responses = " + std::to_string(prompts * responses) +
                  " sequences; balance-demo takes at most " + with_commas(kMaxSequences));
  }

  const Batch batch = make_grpo_batch(prompts, responses, static_cast<uint64_t>(seed));
  int64_t tokens = 0;
  for (int64_t length : batch.lengths) tokens += length;
  std::cout << "GRPO batch: " << prompts << " prompts x " << responses
            << " responses = " << with_commas(prompts * responses) << " sequences, " << with_commas(tokens)
            << " tokens, seed " << seed << "\n"
            << "prompts uniform " << kMinPrompt << ".." << kMaxPrompt << " tokens; responses lognormal, median "
            << kMedianResponse << ", sigma " << fixed(kResponseSigma, 1) << ", cap " << kMaxResponse << "\n"
            << "split over " << ranks << " DP ranks, " << prompts / ranks
            << " prompts per rank, each prompt's responses on one rank\n";

  const auto by_tokens = compare(batch, Workload::tokens(), ranks, "tokens per rank (cost = L):");
  const auto by_compute =
      compare(batch, Workload::verl(), ranks, "compute per rank, verl model (cost = 24576*L + L*L):");
  std::cout << "\nauto cuts rank idle time from " << percent(by_compute.front().idle(), 2) << " (contiguous) to "
            << percent(by_compute.back().idle(), 2)
            << " under the verl model (tokens: " << percent(by_tokens.front().idle(), 2) << " -> "
            << percent(by_tokens.back().idle(), 2) << ").\n";
  return 0;
}

}  // namespace seqflow::cli
