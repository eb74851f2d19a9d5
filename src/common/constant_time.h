// Comparing secrets (tokens): the time taken must not tell a guesser how much
// of a token it has right, so the comparison never stops at a difference.
#pragma once

#include <cstddef>
#include <string_view>

namespace seqflow {

inline bool equal_in_constant_time(std::string_view given, std::string_view expected) {
  if (given.size() != expected.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < given.size(); ++i) difference |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return difference == 0;
}

}  // namespace seqflow
