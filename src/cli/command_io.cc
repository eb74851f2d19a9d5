#include "cli/command_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

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
