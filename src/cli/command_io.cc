#include "cli/command_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "seqflow/error.h"

namespace seqflow::cli {

std::string input_path(const Arguments& args) {
  const auto& files = args.positionals();
  if (files.size() > 1) {
    throw_invalid("expected at most one FILE, got '" + files[0] + "' and '" + files[1] + "'");
  }
  if (files.empty() && isatty(STDIN_FILENO)) {
    throw_invalid("no FILE given and standard input is a terminal; give FILE or pipe lengths in");
  }
  return files.empty() ? "-" : files[0];
}

std::vector<int64_t> consecutive_groups(size_t items, int64_t size, std::string_view what) {
  if (items % static_cast<uint64_t>(size) != 0) {
    throw_invalid("--group-size " + std::to_string(size) + " does not divide the number of " + std::string(what) +
                  " (" + std::to_string(items) + ")");
  }
  std::vector<int64_t> groups(items);
  for (size_t i = 0; i < items; ++i) groups[i] = static_cast<int64_t>(i) / size;
  return groups;
}

Workload workload_option(const Arguments& args) {
  const std::string value = args.get("--workload").value_or("tokens");
  std::error_code error;
  if (!std::filesystem::is_regular_file(value, error)) {
    if (value.ends_with(".json")) throw_invalid("--workload: no model file '" + value + "'");
    return with_option("--workload", [&] { return Workload::parse(value); });
  }
  const std::string text = read_text_file(value, "--workload");
  return with_option("--workload", [&] {
    try {
      return Workload::from_json(text);
    } catch (const Error& e) {
      throw Error(e.code(), "'" + value + "': " + e.what());
    }
  });
}

std::string read_text_file(const std::string& path, std::string_view option) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  if (!file) throw_invalid(std::string(option) + ": cannot read '" + path + "': " + std::strerror(errno));
  return text.str();
}

void write_output(const std::string& path, const std::string& text, std::string_view option) {
  if (path == "-") {
    std::cout << text << std::flush;
    return;
  }
  std::ofstream file(path, std::ios::binary);
  file << text;
  file.close();
  if (!file) {
    throw_invalid(std::string(option) + ": cannot write '" + path + "': " + std::strerror(errno));
  }
}

}  // namespace seqflow::cli
