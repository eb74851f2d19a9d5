// Command-line options of one subcommand: declared once, parsed into values
// and turned into the subcommand's --help text, so the two cannot disagree.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqflow/error.h"

namespace seqflow::cli {

struct Option {
  std::string_view name;   // "--k"; a name without a leading '-' documents a positional
  std::string_view value;  // placeholder such as "K"; empty for a flag
  std::string_view help;   // one paragraph; --help wraps it
};

struct CommandSpec {
  std::string_view name;         // "balance"
  std::string_view usage;        // what follows "seqflow ", e.g. "balance [FILE|-] --k K [options]"
  std::string_view description;  // what the command does, a few lines
  std::span<const Option> options;
  std::string_view notes;    // printed after the options; may be empty
  std::string_view example;  // one command line
};

class Arguments {
 public:
  bool has(std::string_view name) const { return values_.find(name) != values_.end(); }
  std::optional<std::string> get(std::string_view name) const;
  // The option's value as an integer in [min, max]; `fallback` when absent.
  int64_t integer(std::string_view name, int64_t fallback, int64_t min, int64_t max) const;
  // The option's value as a decimal number; nullopt when not given.
  std::optional<double> number(std::string_view name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  friend std::optional<Arguments> parse_arguments(std::span<const std::string>, const CommandSpec&);
  std::map<std::string, std::string, std::less<>> values_;
  std::vector<std::string> positionals_;
};

// Parses "--name value", "--name=value", flags, positionals and "--" (the end
// of options). Prints the help text to stdout and returns nullopt on -h or
// --help. Throws seqflow::Error on an unknown option or a missing value.
std::optional<Arguments> parse_arguments(std::span<const std::string> args, const CommandSpec& spec);

std::string help_text(const CommandSpec& spec);

// `message` about the value of `option`, naming the option: the library
// names it as Python does ("pad_to: ..." becomes "--pad-to: ..."), else
// "OPTION: message".
std::string naming_option(std::string_view option, std::string_view message);

// Runs `step`, which checks or uses the value of `option` alone, so that a
// seqflow::Error it throws names the option (see naming_option).
template <class Step>
decltype(auto) with_option(std::string_view option, Step&& step) {
  try {
    return step();
  } catch (const Error& error) {
    throw Error(error.code(), naming_option(option, error.what()));
  }
}

// `text` as a finite decimal number; the error names `parameter` and `text`.
double parse_number(std::string_view parameter, std::string_view text);
// `text` as an integer in [min, max]; the error names `parameter` and `text`.
int64_t parse_integer(std::string_view parameter, std::string_view text, int64_t min, int64_t max);

}  // namespace seqflow::cli
