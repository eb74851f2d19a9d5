#include "cli/args.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <limits>

#include "seqflow/error.h"

namespace seqflow::cli {

namespace {

constexpr Option kHelpOption{"-h, --help", "", "show this help and exit"};

bool is_positional(const Option& option) { return !option.name.starts_with("-"); }

const Option* find_option(const CommandSpec& spec, std::string_view name) {
  for (const Option& option : spec.options) {
    if (!is_positional(option) && option.name == name) return &option;
  }
  return nullptr;
}

std::string label(const Option& option) {
  std::string out(option.name);
  if (!option.value.empty()) out.append(" ").append(option.value);
  return out;
}

constexpr size_t kLineWidth = 79;

// Appends `text` word-wrapped to lines of at most kLineWidth characters, the
// first continuing the current line (at column `indent`), the rest indented.
void append_wrapped(std::string& out, std::string_view text, size_t indent) {
  size_t column = indent;
  bool line_start = true;
  while (!text.empty()) {
    const size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    text.remove_prefix(space == std::string_view::npos ? text.size() : space + 1);
    if (word.empty()) continue;
    if (!line_start && column + 1 + word.size() > kLineWidth) {
      out.append("\n").append(indent, ' ');
      column = indent;
      line_start = true;
    }
    if (!line_start) {
      out.append(" ");
      ++column;
    }
    out.append(word);
    column += word.size();
    line_start = false;
  }
  out.append("\n");
}

// Two columns: labels padded to `width`, help text wrapped beside them.
void append_options(std::string& out, std::string_view title, const std::vector<const Option*>& options, size_t width) {
  if (options.empty()) return;
  out.append("\n").append(title).append(":\n");
  for (const Option* option : options) {
    const std::string name = label(*option);
    out.append("  ").append(name).append(width - name.size(), ' ');
    append_wrapped(out, option->help, width + 2);
  }
}

}  // namespace

std::optional<std::string> Arguments::get(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

int64_t Arguments::integer(std::string_view name, int64_t fallback, int64_t min, int64_t max) const {
  auto text = get(name);
  return text ? parse_integer(name, *text, min, max) : fallback;
}

std::optional<double> Arguments::number(std::string_view name) const {
  auto text = get(name);
  if (!text) return std::nullopt;
  return parse_number(name, *text);
}

std::optional<Arguments> parse_arguments(std::span<const std::string> args, const CommandSpec& spec) {
  Arguments out;
  bool options_ended = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (options_ended || arg == "-" || !arg.starts_with("-")) {
      out.positionals_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_ended = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      std::cout << help_text(spec);
      return std::nullopt;
    }
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    const Option* option = find_option(spec, name);
    if (option == nullptr) {
      throw_invalid("unknown option '" + name + "'; see 'seqflow " + std::string(spec.name) + " --help'");
    }
    if (option->value.empty()) {
      if (equals != std::string::npos) throw_invalid(name + " takes no value, got '" + arg + "'");
      out.values_[name] = "";
    } else if (equals != std::string::npos) {
      out.values_[name] = arg.substr(equals + 1);
    } else if (i + 1 == args.size() || args[i + 1].starts_with("--")) {
      throw_invalid(name + " needs a value " + std::string(option->value) +
                    (i + 1 == args.size() ? "" : ", got the option '" + args[i + 1] + "'"));
    } else {
      out.values_[name] = args[++i];
    }
  }
  return out;
}

std::string help_text(const CommandSpec& spec) {
  std::vector<const Option*> positionals;
  std::vector<const Option*> options;
  for (const Option& option : spec.options) {
    (is_positional(option) ? positionals : options).push_back(&option);
  }
  options.push_back(&kHelpOption);

  std::string out = "usage: seqflow " + std::string(spec.usage) + "\n\n";
  out.append(spec.description).append("\n");
  size_t width = label(kHelpOption).size();
  for (const Option& option : spec.options) width = std::max(width, label(option).size());
  width += 3;
  append_options(out, "arguments", positionals, width);
  append_options(out, "options", options, width);
  if (!spec.notes.empty()) out.append("\n").append(spec.notes).append("\n");
  out.append("\nexample:\n  ").append(spec.example).append("\n");
  return out;
}

std::string naming_option(std::string_view option, std::string_view message) {
  if (message.starts_with(option)) return std::string(message);
  std::string python_name(option.substr(option.find_first_not_of('-')));
  std::replace(python_name.begin(), python_name.end(), '-', '_');
  const bool named = message.starts_with(python_name) && message.size() > python_name.size() &&
                     (message[python_name.size()] == ':' || message[python_name.size()] == ' ');
  if (named) return std::string(option).append(message.substr(python_name.size()));
  return std::string(option).append(": ").append(message);
}

double parse_number(std::string_view parameter, std::string_view text) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    throw_invalid(std::string(parameter) + ": '" + std::string(text) + "' is not a number");
  }
  return value;
}

int64_t parse_integer(std::string_view parameter, std::string_view text, int64_t min, int64_t max) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string quoted = std::string("'").append(text).append("'");
  if (error == std::errc::result_out_of_range) {
    throw_invalid(std::string(parameter) + ": " + quoted + " is out of the int64 range");
  }
  if (error != std::errc() || end != text.data() + text.size()) {
    throw_invalid(std::string(parameter) + ": " + quoted + " is not an integer");
  }
  if (value < min || value > max) {
    const std::string range = max == std::numeric_limits<int64_t>::max()
                                  ? ">= " + std::to_string(min)
                                  : "between " + std::to_string(min) + " and " + std::to_string(max);
    throw_invalid(std::string(parameter) + " must be " + range + ", got " + std::string(text));
  }
  return value;
}

}  // namespace seqflow::cli
