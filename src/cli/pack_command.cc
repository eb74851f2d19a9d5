// seqflow pack: plan the packs of one global batch and report the plan; with
// --compare, beside the xtuner baseline.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/args.h"
#include "cli/command_io.h"
#include "cli/commands.h"
#include "cli/lengths_file.h"
#include "cli/progress_bar.h"
#include "cli/table.h"
#include "pack/xtuner_baseline.h"
#include "seqflow/error.h"
#include "seqflow/pack.h"

namespace seqflow::cli {

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

constexpr Option kOptions[] = {
    {"FILE|-", "",
     "sequence lengths, one per sample: one integer per line, a JSON list of integers or "
     "a 1-D .npy array; '-' or no FILE reads standard input"},
    {"--dp", "D", "data-parallel ranks, >= 1; required"},
    {"--steps", "S", "optimizer steps every rank takes, >= 1; required"},
    {"--cap", "C", "pack_max_length: the most tokens one pack may hold, at most 2147483647; required"},
    {"--group-size", "N",
     "samples i*N .. i*N+N-1 form group i (e.g. the N responses of one prompt); a group "
     "stays on one rank and in one step. The sample count must be a multiple of N"},
    {"--workload", "MODEL",
     "what balancing evens out: tokens (default), verl, quadratic(a,b) or the path of a model saved as JSON "
     "(seqflow calibrate --out)"},
    {"--pad-to", "MODE",
     "cap (every pack to the cap: static shapes; default), step_max (every pack to the "
     "longest pack of its slot across ranks) or none"},
    {"--pad-chunk", "N", "the longest padding sequence (default 1024)"},
    {"--seed", "S", "only breaks ties between ranks (default 0)"},
    {"--json", "OUT",
     "write the plan as JSON to file OUT, or to stdout if OUT is '-' (the summary then goes "
     "to stderr): packs[rank][step][slot] (sample indexes), pack_tokens, pack_padding, "
     "stats, notes"},
    {"--compare", "",
     "also run the xtuner baseline (Karmarkar-Karp over ranks, steps and ceil(tokens/cap) "
     "packs, every pack padded to the cap) and print both side by side"},
    {"--progress", "",
     "draw a progress bar of the planner's phases on stderr even when stderr is not a terminal (by default "
     "it is drawn only when stderr is a terminal); stdout is never touched"},
    {"--no-progress", "", "never draw the progress bar"},
};

constexpr CommandSpec kSpec{
    "pack",
    "pack [FILE|-] --dp D --steps S --cap C [options]",
    "Spread one global batch over D ranks and S optimizer steps and pack each (rank,\n"
    "step) into sequences of at most C tokens: every sample once, exactly S steps,\n"
    "no pack over the cap, the same pack count on every rank within a step.\n"
    "spread = (max - min) / mean tokens across ranks within a step.",
    kOptions,
    "Progress: on a terminal, stderr shows one bar per planner phase (steps_first, steps_by_size when\n"
    "tried, packing) as it runs; --progress and --no-progress override the terminal check.\n"
    "Exit status: 0 on success, 2 on bad input (e.g. a sample longer than --cap).",
    "seqflow pack lengths.txt --dp 32 --steps 8 --cap 65536 --group-size 8 --compare",
};

struct Run {
  std::string name;
  std::optional<pack::Plan> plan;  // empty when the planner failed
  std::string error;
  double milliseconds = 0;
};

template <typename Planner>
Run timed(std::string name, Planner&& planner) {
  Run run{std::move(name), std::nullopt, "", 0};
  const auto start = std::chrono::steady_clock::now();
  run.plan = planner();
  run.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return run;
}

double max_of(const std::vector<double>& values) {
  return values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
}

// "1 1 1 1" for few steps, "1..3 (total 17)" for many.
std::string packs_per_step(const std::vector<int64_t>& packs) {
  if (packs.size() <= 8) {
    std::string out;
    for (int64_t p : packs) {
      if (!out.empty()) out += ' ';
      out += std::to_string(p);
    }
    return out;
  }
  auto [lo, hi] = std::minmax_element(packs.begin(), packs.end());
  int64_t total = 0;
  for (int64_t p : packs) total += p;
  return std::to_string(*lo) + ".." + std::to_string(*hi) + " (total " + std::to_string(total) + ")";
}

void print_summary(std::ostream& out, const std::vector<int64_t>& lengths, const pack::Options& options,
                   const Run& run) {
  const pack::Plan& plan = *run.plan;
  const pack::Stats& stats = plan.stats;
  auto line = [&out](std::string_view key, const std::string& value) {
    out << key << std::string(13 - key.size(), ' ') << value << "\n";
  };
  std::string input =
      with_commas(static_cast<int64_t>(lengths.size())) + " samples, " + with_commas(stats.real_tokens) + " tokens";
  line("input", input);
  line("plan", std::to_string(plan.dp_size) + " ranks x " + std::to_string(plan.optimizer_steps) + " steps, cap " +
                   with_commas(plan.pack_max_length) + ", pad to " + std::string(pack::to_string(plan.pad_to)) +
                   ", workload " + options.workload.name());
  line("steps", std::to_string(plan.optimizer_steps) + " on every rank");
  line("packs/step", packs_per_step(stats.packs_per_step) +
                         "  (fewest the rank split allows: " + packs_per_step(stats.min_packs_per_step) + ")");
  line("largest", with_commas(stats.max_pack_tokens) + " tokens in one pack");
  line("padding", percent(stats.padding_ratio, 2) + "  (" + with_commas(stats.padding_tokens) + " tokens, " +
                      with_commas(stats.padding_packs) + " padding packs)");
  line("spread", percent(max_of(stats.token_spread), 3) + "  tokens, worst step");
  line("time", fixed(run.milliseconds, 3) + " ms");
  for (const std::string& note : plan.notes) line("note", note);
}

void print_comparison(std::ostream& out, const std::vector<int64_t>& lengths, const std::vector<Run>& runs) {
  const pack::Plan& ours = *runs.front().plan;
  out << with_commas(static_cast<int64_t>(lengths.size())) << " samples, " << ours.dp_size << " ranks x "
      << ours.optimizer_steps << " steps, cap " << with_commas(ours.pack_max_length) << "\n";
  Table table({"planner", "steps", "packs/step", "largest", "over cap", "spread", "padding", "time ms"});
  for (const Run& run : runs) {
    if (!run.plan) {
      table.add_row({run.name, "-", "-", "-", "-", "-", "-", "failed: " + run.error});
      continue;
    }
    const pack::Stats& s = run.plan->stats;
    table.add_row({run.name, std::to_string(run.plan->optimizer_steps), packs_per_step(s.packs_per_step),
                   with_commas(s.max_pack_tokens), with_commas(s.packs_over_cap), percent(max_of(s.token_spread), 3),
                   percent(s.padding_ratio, 2), fixed(run.milliseconds, 3)});
  }
  table.print(out);
}

void write_json(const std::string& path, const pack::Plan& plan) {
  nlohmann::ordered_json json;
  json["dp_size"] = plan.dp_size;
  json["optimizer_steps"] = plan.optimizer_steps;
  json["pack_max_length"] = plan.pack_max_length;
  json["pad_to"] = pack::to_string(plan.pad_to);
  json["pad_chunk"] = plan.pad_chunk;
  auto& packs = json["packs"] = nlohmann::ordered_json::array();
  auto& tokens = json["pack_tokens"] = nlohmann::ordered_json::array();
  auto& padding = json["pack_padding"] = nlohmann::ordered_json::array();
  for (const auto& rank : plan.packs) {
    auto& rank_packs = packs.emplace_back(nlohmann::ordered_json::array());
    auto& rank_tokens = tokens.emplace_back(nlohmann::ordered_json::array());
    auto& rank_padding = padding.emplace_back(nlohmann::ordered_json::array());
    for (const auto& step : rank) {
      auto& step_packs = rank_packs.emplace_back(nlohmann::ordered_json::array());
      auto& step_tokens = rank_tokens.emplace_back(nlohmann::ordered_json::array());
      auto& step_padding = rank_padding.emplace_back(nlohmann::ordered_json::array());
      for (const pack::Pack& p : step) {
        step_packs.push_back(p.samples);
        step_tokens.push_back(p.tokens);
        step_padding.push_back(p.padding);
      }
    }
  }
  const pack::Stats& s = plan.stats;
  json["stats"] = {{"tokens", s.tokens},
                   {"workloads", s.workloads},
                   {"token_spread", s.token_spread},
                   {"workload_spread", s.workload_spread},
                   {"packs_per_step", s.packs_per_step},
                   {"min_packs_per_step", s.min_packs_per_step},
                   {"real_tokens", s.real_tokens},
                   {"padding_tokens", s.padding_tokens},
                   {"padding_ratio", s.padding_ratio},
                   {"padding_packs", s.padding_packs},
                   {"empty_rank_steps", s.empty_rank_steps},
                   {"max_pack_tokens", s.max_pack_tokens},
                   {"packs_over_cap", s.packs_over_cap}};
  json["notes"] = plan.notes;
  write_output(path, json.dump() + "\n", "--json");
}

// --progress, --no-progress, else whether stderr is a terminal (as git does).
bool wants_progress(const Arguments& args) {
  if (args.has("--progress") && args.has("--no-progress")) {
    throw_invalid("--progress and --no-progress contradict each other; give one");
  }
  if (args.has("--progress")) return true;
  if (args.has("--no-progress")) return false;
  return isatty(STDERR_FILENO) == 1;
}

}  // namespace

int run_pack(std::span<const std::string> arguments) {
  const std::optional<Arguments> args = parse_arguments(arguments, kSpec);
  if (!args) return 0;
  for (const char* required : {"--dp", "--steps", "--cap"}) {
    if (!args->has(required)) throw_invalid(std::string(required) + " is required");
  }
  const bool show_progress = wants_progress(*args);
  pack::Options options;
  options.dp_size = args->integer("--dp", 0, 1, kInt64Max);
  options.optimizer_steps = args->integer("--steps", 0, 1, kInt64Max);
  options.pack_max_length = args->integer("--cap", 0, 1, pack::kMaxPackLength);
  options.workload = workload_option(*args);
  options.pad_to = with_option("--pad-to", [&] { return pack::parse_pad_to(args->get("--pad-to").value_or("cap")); });
  options.pad_chunk = args->integer("--pad-chunk", 1024, 1, kInt64Max);
  options.seed = static_cast<uint64_t>(args->integer("--seed", 0, 0, kInt64Max));
  const std::optional<std::string> json_path = args->get("--json");
  const std::vector<int64_t> lengths = read_lengths(input_path(*args), "FILE");
  const int64_t group_size = args->integer("--group-size", 0, 1, kInt64Max);
  const std::vector<int64_t> groups =
      group_size > 0 ? consecutive_groups(lengths.size(), group_size, "samples") : std::vector<int64_t>{};
  options.groups = groups;
  ProgressBar bar(std::cerr, "samples");
  if (show_progress) {
    options.progress = [&bar](const pack::PlanProgress& at) {
      bar.update(pack::to_string(at.phase), at.done, at.total);
    };
  }

  std::vector<Run> runs;
  runs.push_back(timed("seqflow, pad to " + std::string(pack::to_string(options.pad_to)),
                       [&] { return pack::plan(lengths, options); }));
  if (args->has("--compare")) {
    try {
      runs.push_back(timed("xtuner baseline", [&] {
        return pack::baseline::xtuner_pack(lengths, options.dp_size, options.optimizer_steps, options.pack_max_length,
                                           options.pad_chunk);
      }));
    } catch (const Error& e) {
      runs.push_back(Run{"xtuner baseline", std::nullopt, e.what(), 0});
    }
  }
  if (json_path) write_json(*json_path, *runs.front().plan);
  std::ostream& human = json_path == "-" ? std::cerr : std::cout;
  print_summary(human, lengths, options, runs.front());
  if (runs.size() > 1) {
    human << "\n";
    print_comparison(human, lengths, runs);
  }
  return 0;
}

}  // namespace seqflow::cli
