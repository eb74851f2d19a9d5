// seqflow balance: split lengths read from a file into K parts and report the plan.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "cli/args.h"
#include "cli/command_io.h"
#include "cli/commands.h"
#include "cli/lengths_file.h"
#include "cli/table.h"
#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace seqflow::cli {

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

constexpr Option kOptions[] = {
    {"FILE|-", "",
     "sequence lengths, one per item: one integer per line (blank lines ignored), "
     "a JSON list of integers, or a 1-D .npy array of little-endian integers "
     "(int8..int64, uint8..uint64); '-' or no FILE reads standard input"},
    {"--k", "K", "number of parts (e.g. DP ranks), >= 1; required"},
    {"--cardinality", "MODE",
     "items (or groups) per part: free (any count; default), equal (the same count; "
     "needs a multiple of K) or balanced (counts differ by at most one)"},
    {"--workload", "MODEL",
     "cost of a sequence of length L: tokens (L; default), verl (24576*L + L*L), "
     "quadratic(a,b) (a*L + b*L*L; also written quadratic:a,b), or the path of a "
     "model saved as JSON (seqflow calibrate --out)"},
    {"--group-size", "N",
     "items i*N .. i*N+N-1 form group i (e.g. the N responses of one prompt); "
     "the item count must be a multiple of N"},
    {"--groups", "FILE",
     "one group id per item, in any format FILE accepts; not with --group-size. "
     "A group stays in one part and counts as one for --cardinality"},
    {"--algorithm", "NAME",
     "auto (default: runs the suitable algorithms, refines each plan, keeps the best), "
     "kk (Karmarkar-Karp largest differencing, as verl) or "
     "lpt (largest first onto the lightest part with room)"},
    {"--json", "OUT",
     "write the plan as JSON to file OUT, or to stdout if OUT is '-' (the summary then "
     "goes to stderr): k, algorithm, cardinality, workload, parts (item indexes per "
     "part), sums (workload per part), lower_bound, spread, gap, max_over_mean"},
    {"--compare", "",
     "run kk, lpt and auto on the same input and print a table (time, max load, "
     "spread, gap); --json still writes the --algorithm plan"},
};

constexpr CommandSpec kSpec{
    "balance",
    "balance [FILE|-] --k K [options]",
    "Split sequence lengths into K parts of near-equal load and report how close\n"
    "the plan is to the lower bound (no plan's heaviest part can be lighter).\n"
    "spread = (max - min) / mean part load; gap = max / lower bound - 1.",
    kOptions,
    "Exit status: 0 on success, 2 on bad input.",
    "seqflow balance lengths.txt --k 8 --group-size 4 --workload verl --compare",
};

constexpr balance::Algorithm kAllAlgorithms[] = {balance::Algorithm::kKK, balance::Algorithm::kLPT,
                                                 balance::Algorithm::kAuto};

struct Input {
  std::vector<int64_t> lengths;
  std::vector<int64_t> groups;  // empty: every item is its own group
};

struct Run {
  balance::Algorithm algorithm;
  balance::Partition plan;
  double milliseconds;
};

Input read_input(const Arguments& args) {
  if (args.has("--group-size") && args.has("--groups")) {
    throw_invalid("--group-size and --groups both define groups; give only one");
  }
  const int64_t group_size = args.integer("--group-size", 0, 1, kInt64Max);
  Input input;
  input.lengths = read_lengths(input_path(args), "FILE");
  if (group_size > 0) input.groups = consecutive_groups(input.lengths.size(), group_size, "items");
  if (auto file = args.get("--groups")) {
    input.groups = read_group_ids(*file, "--groups");
    if (input.groups.size() != input.lengths.size()) {
      throw_invalid("--groups '" + *file + "' has " + std::to_string(input.groups.size()) + " ids but FILE has " +
                    std::to_string(input.lengths.size()) + " lengths; give one group id per item");
    }
  }
  return input;
}

Run run_algorithm(const Input& input, int64_t k, balance::Options options, balance::Algorithm algorithm) {
  options.algorithm = algorithm;
  options.groups = input.groups;
  const auto start = std::chrono::steady_clock::now();
  balance::Partition plan = balance::partition(input.lengths, k, options);
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
  return Run{algorithm, std::move(plan), elapsed.count()};
}

size_t group_count(const Input& input) {
  std::vector<int64_t> ids = input.groups;
  std::sort(ids.begin(), ids.end());
  return static_cast<size_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

// "1,000 items" or "1,000 items (250 groups)"
std::string count_items(const Input& input) {
  std::string out = with_commas(static_cast<int64_t>(input.lengths.size())) + " items";
  if (!input.groups.empty()) {
    out += " (" + with_commas(static_cast<int64_t>(group_count(input))) + " groups)";
  }
  return out;
}

double mean_load(const balance::Partition& plan) {
  double total = 0;
  for (int64_t sum : plan.sums) total += static_cast<double>(sum);
  return total / static_cast<double>(plan.sums.size());
}

void print_summary(std::ostream& out, const Input& input, int64_t k, const balance::Options& options, const Run& run) {
  const auto& sums = run.plan.sums;
  const auto [lightest, heaviest] = std::minmax_element(sums.begin(), sums.end());
  auto line = [&out](std::string_view key, const std::string& value) {
    out << key << std::string(13 - key.size(), ' ') << value << "\n";
  };
  line("input", count_items(input));
  line("k", std::to_string(k));
  line("cardinality", std::string(balance::to_string(options.cardinality)));
  line("workload", options.workload.name());
  line("algorithm", std::string(balance::to_string(run.algorithm)));
  line("part load", "min " + with_commas(*lightest) + "  mean " + with_commas(mean_load(run.plan), 1) + "  max " +
                        with_commas(*heaviest));
  line("spread", percent(run.plan.spread) + "  (max - min) / mean");
  line("lower bound", with_commas(run.plan.lower_bound));
  line("gap", percent(run.plan.gap) + "  max / lower bound - 1");
  line("time", fixed(run.milliseconds, 3) + " ms");
}

void print_comparison(std::ostream& out, const Input& input, int64_t k, const balance::Options& options,
                      const std::vector<Run>& runs) {
  out << count_items(input) << ", k=" << k << ", cardinality " << balance::to_string(options.cardinality)
      << ", workload " << options.workload.name() << ", lower bound " << with_commas(runs.front().plan.lower_bound)
      << "\n";
  Table table({"algorithm", "time ms", "max load", "spread", "gap"});
  for (const Run& run : runs) {
    table.add_row({std::string(balance::to_string(run.algorithm)), fixed(run.milliseconds, 3),
                   with_commas(run.plan.heaviest()), percent(run.plan.spread), percent(run.plan.gap)});
  }
  table.print(out);
}

void write_json(const std::string& path, int64_t k, const balance::Options& options, const Run& run) {
  nlohmann::ordered_json plan;
  plan["k"] = k;
  plan["algorithm"] = balance::to_string(run.algorithm);
  plan["cardinality"] = balance::to_string(options.cardinality);
  plan["workload"] = options.workload.name();
  plan["parts"] = run.plan.parts;
  plan["sums"] = run.plan.sums;
  plan["lower_bound"] = run.plan.lower_bound;
  plan["spread"] = run.plan.spread;
  plan["gap"] = run.plan.gap;
  plan["max_over_mean"] = run.plan.max_over_mean;
  write_output(path, plan.dump() + "\n", "--json");
}

}  // namespace

int run_balance(std::span<const std::string> arguments) {
  const std::optional<Arguments> args = parse_arguments(arguments, kSpec);
  if (!args) return 0;
  if (!args->has("--k")) throw_invalid("--k K is required (the number of parts)");
  const int64_t k = args->integer("--k", 0, 1, kInt64Max);
  balance::Options options;
  options.cardinality = with_option(
      "--cardinality", [&] { return balance::parse_cardinality(args->get("--cardinality").value_or("free")); });
  options.workload = workload_option(*args);
  options.algorithm =
      with_option("--algorithm", [&] { return balance::parse_algorithm(args->get("--algorithm").value_or("auto")); });
  const std::optional<std::string> json_path = args->get("--json");
  const Input input = read_input(*args);

  std::vector<Run> runs;
  if (args->has("--compare")) {
    for (balance::Algorithm algorithm : kAllAlgorithms) {
      runs.push_back(run_algorithm(input, k, options, algorithm));
    }
  } else {
    runs.push_back(run_algorithm(input, k, options, options.algorithm));
  }
  const Run& chosen =
      *std::find_if(runs.begin(), runs.end(), [&](const Run& run) { return run.algorithm == options.algorithm; });

  if (json_path) write_json(*json_path, k, options, chosen);
  std::ostream& human = json_path == "-" ? std::cerr : std::cout;
  if (args->has("--compare")) {
    print_comparison(human, input, k, options, runs);
  } else {
    print_summary(human, input, k, options, chosen);
  }
  return 0;
}

}  // namespace seqflow::cli
