// The seqflow command: dispatches to a subcommand and turns its errors into a
// one-line message and exit status 2 (bad input) or 1 (internal failure).
#include <algorithm>
#include <exception>
#include <iostream>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "seqflow/error.h"

namespace {

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(std::span<const std::string> args);
};

constexpr Command kCommands[] = {
    {"balance", "split sequence lengths into K parts of near-equal load", seqflow::cli::run_balance},
    {"balance-demo", "compare contiguous, verl kk and auto splits of a GRPO batch over DP ranks",
     seqflow::cli::run_balance_demo},
    {"calibrate", "fit a workload model in seconds to measured micro-batch times (JSON lines)",
     seqflow::cli::run_calibrate},
    {"keygen", "write a CURVE key pair for remote mode (PREFIX.key, PREFIX.pub)", seqflow::cli::run_keygen},
    {"pack", "plan the packs of a batch over DP ranks and optimizer steps", seqflow::cli::run_pack},
    {"serve", "run the controller or a storage unit as a service (remote mode)", seqflow::cli::run_serve},
};

constexpr int kExitBadInput = 2;
constexpr int kExitInternal = 1;

void print_usage(std::ostream& out) {
  out << "usage: seqflow <command> [options]\n\n"
         "Balanced data flow for LLM reinforcement-learning post-training.\n\n"
         "commands:\n";
  size_t width = std::string_view("help").size();
  for (const Command& command : kCommands) width = std::max(width, command.name.size());
  auto row = [&](std::string_view name, std::string_view summary) {
    out << "  " << name << std::string(width + 3 - name.size(), ' ') << summary << "\n";
  };
  for (const Command& command : kCommands) row(command.name, command.summary);
  row("help", "show this help, or a command's: seqflow help <command>");
  out << "\n"
         "Run 'seqflow <command> --help' for the options of a command.\n"
         "Exit status: 0 on success, 2 on bad input, 1 on an internal error.\n\n"
         "example:\n"
         "  seqflow balance-demo --seed 1\n";
}

const Command* find_command(std::string_view name) {
  for (const Command& command : kCommands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

int unknown_command(std::string_view name) {
  std::cerr << "seqflow: error: unknown command '" << name << "'; run 'seqflow --help' for the list of commands\n";
  return kExitBadInput;
}

int run(const Command& command, std::span<const std::string> args) {
  const std::string prefix = "seqflow " + std::string(command.name) + ": error: ";
  try {
    return command.run(args);
  } catch (const seqflow::Error& e) {
    std::cerr << prefix << e.what() << "\n";
    return e.code() == seqflow::ErrorCode::kInternal ? kExitInternal : kExitBadInput;
  } catch (const std::bad_alloc&) {
    std::cerr << prefix << "out of memory\n";
    return kExitInternal;
  } catch (const std::exception& e) {
    std::cerr << prefix << "internal error: " << e.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_usage(std::cerr);
    return kExitBadInput;
  }
  const std::string& name = args[0];
  if (name == "-h" || name == "--help" || (name == "help" && args.size() == 1)) {
    print_usage(std::cout);
    return 0;
  }
  if (name == "help") {
    const Command* command = find_command(args[1]);
    if (command == nullptr) return unknown_command(args[1]);
    const std::vector<std::string> help = {"--help"};
    return run(*command, help);
  }
  const Command* command = find_command(name);
  if (command == nullptr) return unknown_command(name);
  return run(*command, std::span(args).subspan(1));
}
