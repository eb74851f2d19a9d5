// Integer arrays for the command line (sequence lengths, group ids), read from
// a file or standard input in any of three formats, told apart by content:
//   - a .npy file (starts with "\x93NUMPY"): 1-D, little-endian integer dtype;
//   - a JSON list of integers (first non-space character '[');
//   - text: one integer per line, blank lines ignored.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace seqflow::cli {

// Lengths must be >= 0. `path` "-" is standard input; `parameter` names the
// source in error messages (e.g. "FILE"), which also give the line or index.
std::vector<int64_t> read_lengths(const std::string& path, std::string_view parameter);

// Group ids may be any int64.
std::vector<int64_t> read_group_ids(const std::string& path, std::string_view parameter);

}  // namespace seqflow::cli
