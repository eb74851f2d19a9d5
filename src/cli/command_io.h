// Input and output steps that several subcommands share.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"
#include "seqflow/workload.h"

namespace seqflow::cli {

// The FILE positional, "-" for standard input; refuses to block on a terminal.
std::string input_path(const Arguments& args);

// Items i*size .. i*size+size-1 form group i; `what` names the items in errors.
std::vector<int64_t> consecutive_groups(size_t items, int64_t size, std::string_view what);

// The --workload option: a spec (tokens, the default; verl; quadratic(a,b)) or
// the path of a model saved as JSON (Workload::to_json, `seqflow calibrate
// --out`, Python's Workload.save).
Workload workload_option(const Arguments& args);

// The whole file `path`; errors name `option`.
std::string read_text_file(const std::string& path, std::string_view option);

// `text` to the file `path`, or to standard output when `path` is "-".
void write_output(const std::string& path, const std::string& text, std::string_view option);

}  // namespace seqflow::cli
