// seqflow demo: the project's demo, the same one `./run demo` runs: the GRPO
// pipeline of the Python package (`python -m seqflow demo`), so one name
// tells one story. The Python interpreter is the one the package was
// installed with (beside this executable in a virtual environment), else
// $SEQFLOW_PYTHON, else python3 on PATH.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "seqflow/error.h"

namespace seqflow::cli {
namespace {

std::string python_interpreter() {
  if (const char* chosen = std::getenv("SEQFLOW_PYTHON"); chosen != nullptr && *chosen != '\0') return chosen;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    for (const char* name : {"python", "python3"}) {
      const std::filesystem::path beside = self.parent_path() / name;
      if (::access(beside.c_str(), X_OK) == 0) return beside.string();
    }
  }
  return "python3";
}

}  // namespace

int run_demo(std::span<const std::string> args) {
  const std::string python = python_interpreter();
  std::vector<std::string> words = {python, "-m", "seqflow", "demo"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  std::cout.flush();
  ::execvp(argv[0], argv.data());
  // Only on failure: exec replaces this process.
  throw Error(ErrorCode::kInternal, "the demo runs the Python package's (python -m seqflow demo), but '" + python +
                                        "' cannot be started: " + std::strerror(errno) +
                                        "; install it with ./run demo, or set SEQFLOW_PYTHON");
}

}  // namespace seqflow::cli
