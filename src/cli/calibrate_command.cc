// seqflow calibrate: fit a calibrated workload model to measured micro-batch
// times (JSON lines) and print its coefficients and fit report.
#include <cstdio>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/args.h"
#include "cli/command_io.h"
#include "cli/commands.h"
#include "cli/table.h"
#include "seqflow/calibration.h"
#include "seqflow/error.h"

namespace seqflow::cli {

namespace {

constexpr Option kOptions[] = {
    {"--timings", "FILE",
     "measured micro-batches, one JSON object per line: {\"lengths\": [L1, L2, ...], \"seconds\": S} "
     "(blank lines ignored); '-' reads standard input; required"},
    {"--out", "PATH", "also write the model as JSON to PATH, for --workload PATH of balance and pack"},
    {"--min-records", "N", "fewest records the fit accepts (default 8, at least 4)"},
    {"--alignment", "N",
     "also fit per_unaligned_token_squared, the extra L^2 seconds of a sequence whose length is not a multiple "
     "of N (8 for torch's CPU attention with AVX2; default 1: no such term)"},
};

constexpr CommandSpec kSpec{
    "calibrate",
    "calibrate --timings FILE [--out model.json] [options]",
    "Fit seconds = per_micro_batch + sum over sequences of (per_token * L +\n"
    "per_token_squared * L^2 + per_sequence) to measured micro-batch times by\n"
    "non-negative least squares on relative errors, leaving out outliers\n"
    "(warm-up steps, stragglers), and print the coefficients and how well the\n"
    "model predicts the records kept.",
    kOptions,
    "Balance with the model: seqflow balance lengths.txt --k 8 --workload model.json",
    "seqflow calibrate --timings timings.jsonl --out model.json",
};

std::vector<TimingRecord> parse_timings(const std::string& text, const std::string& path) {
  std::vector<TimingRecord> records;
  std::istringstream lines(text);
  std::string line;
  for (int64_t number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "--timings '" + path + "' line " + std::to_string(number);
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& error) {
      throw_invalid(where + ": not valid JSON (" + error.what() + ")");
    }
    const auto lengths = record.is_object() ? record.find("lengths") : record.end();
    const auto seconds = record.is_object() ? record.find("seconds") : record.end();
    if (!record.is_object() || record.size() != 2 || lengths == record.end() || seconds == record.end()) {
      throw_invalid(where + ": expected {\"lengths\": [...], \"seconds\": S}, got " + line);
    }
    if (!seconds->is_number()) throw_invalid(where + ": seconds = " + seconds->dump() + " is not a number");
    TimingRecord& out = records.emplace_back();
    out.seconds = seconds->get<double>();
    if (!lengths->is_array()) throw_invalid(where + ": lengths = " + lengths->dump() + " is not a list");
    for (const auto& length : *lengths) {
      if (!length.is_number_integer()) {
        throw_invalid(where + ": lengths holds " + length.dump() + ", not an integer");
      }
      out.lengths.push_back(length.get<int64_t>());
    }
  }
  return records;
}

std::string seconds_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

void print_model(std::ostream& out, const Workload& model) {
  const SecondsCoefficients& c = model.coefficients();
  const FitReport& fit = model.fit();
  Table table({"coefficient", "seconds"});
  table.add_row({"per_token", seconds_text(c.per_token)});
  table.add_row({"per_token_squared", seconds_text(c.per_token_squared)});
  table.add_row({"per_sequence", seconds_text(c.per_sequence)});
  table.add_row({"per_micro_batch", seconds_text(c.per_micro_batch)});
  if (c.alignment > 1) {
    table.add_row({"per_unaligned_token_squared (L % " + std::to_string(c.alignment) + " != 0)",
                   seconds_text(c.per_unaligned_token_squared)});
  }
  table.print(out);
  out << "\nrecords " << fit.records << ", outliers " << fit.outliers << "; relative error of the records kept: median "
      << percent(fit.median_error, 2) << ", p90 " << percent(fit.p90_error, 2) << ", max " << percent(fit.max_error, 2)
      << "\n";
}

}  // namespace

int run_calibrate(std::span<const std::string> arguments) {
  const std::optional<Arguments> args = parse_arguments(arguments, kSpec);
  if (!args) return 0;
  const std::optional<std::string> path = args->get("--timings");
  if (!path) throw_invalid("--timings FILE is required (JSON lines of {\"lengths\": [...], \"seconds\": S})");
  CalibrationOptions options;
  options.min_records = args->integer("--min-records", options.min_records, 4, std::numeric_limits<int64_t>::max());
  options.alignment = args->integer("--alignment", options.alignment, 1, std::numeric_limits<int64_t>::max());
  const std::string text =
      *path == "-" ? std::string(std::istreambuf_iterator<char>(std::cin), {}) : read_text_file(*path, "--timings");
  const std::vector<TimingRecord> records = parse_timings(text, *path);
  const Workload model = with_option("--timings", [&] { return calibrate(records, options); });
  print_model(std::cout, model);
  if (const auto out = args->get("--out")) {
    write_output(*out, model.to_json() + "\n", "--out");
    std::cout << "wrote " << *out << "\n";
  }
  return 0;
}

}  // namespace seqflow::cli
