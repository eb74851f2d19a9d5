// Plain-text tables and number formatting for the command's human output.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace seqflow::cli {

// Columns sized to their widest cell: the first left-aligned, the others
// right-aligned, two spaces apart.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void print(std::ostream& out, int indent = 0) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// 1234567 -> "1,234,567"
std::string with_commas(int64_t value);
// 1234.5 with 1 decimal -> "1,234.5"
std::string with_commas(double value, int decimals);
// 0.01234 -> "1.234%" with 3 decimals
std::string percent(double ratio, int decimals = 3);
// Fixed-point without separators: 1.23456 with 2 decimals -> "1.23"
std::string fixed(double value, int decimals);

}  // namespace seqflow::cli
