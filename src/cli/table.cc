#include "cli/table.h"

#include <algorithm>
#include <cstdio>

namespace seqflow::cli {

void Table::print(std::ostream& out, int indent) const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows_) {
    std::string line(static_cast<size_t>(indent), ' ');
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string padding(widths[c] - row[c].size(), ' ');
      if (c > 0) line += "  ";
      line += c == 0 ? row[c] + padding : padding + row[c];
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << '\n';
  }
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

namespace {

// Separates thousands in the integer digits of a formatted number.
std::string insert_commas(std::string text) {
  const size_t digits_start = text.front() == '-' ? 1 : 0;
  size_t digits_end = text.find('.');
  if (digits_end == std::string::npos) digits_end = text.size();
  for (size_t at = digits_end; at > digits_start + 3; at -= 3) text.insert(at - 3, 1, ',');
  return text;
}

}  // namespace

std::string with_commas(double value, int decimals) { return insert_commas(fixed(value, decimals)); }

std::string with_commas(int64_t value) { return insert_commas(std::to_string(value)); }

std::string percent(double ratio, int decimals) { return fixed(100.0 * ratio, decimals) + "%"; }

}  // namespace seqflow::cli
