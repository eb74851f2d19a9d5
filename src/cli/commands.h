// The subcommands of the seqflow command line. Each takes the arguments that
// follow its name and returns the process exit status; bad input is reported
// by throwing seqflow::Error, which main turns into "seqflow NAME: error: ...".
//
// To add a subcommand: declare run_NAME here and add one row to the table in
// main.cc.
#pragma once

#include <span>
#include <string>

namespace seqflow::cli {

int run_balance(std::span<const std::string> args);
int run_balance_demo(std::span<const std::string> args);
int run_calibrate(std::span<const std::string> args);
int run_keygen(std::span<const std::string> args);
int run_pack(std::span<const std::string> args);
int run_serve(std::span<const std::string> args);

}  // namespace seqflow::cli
