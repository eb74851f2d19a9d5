// Names of the balancing options, as the CLI and Python spell them.
#include <string>

#include "seqflow/balance.h"
#include "seqflow/error.h"

namespace seqflow::balance {

Cardinality parse_cardinality(std::string_view name) {
  if (name == "free") return Cardinality::kFree;
  if (name == "equal") return Cardinality::kEqual;
  if (name == "balanced") return Cardinality::kBalanced;
  throw_invalid("cardinality: unknown value '" + std::string(name) + "'; expected free, equal or balanced");
}

Algorithm parse_algorithm(std::string_view name) {
  if (name == "auto") return Algorithm::kAuto;
  if (name == "kk") return Algorithm::kKK;
  if (name == "lpt") return Algorithm::kLPT;
  throw_invalid("algorithm: unknown value '" + std::string(name) + "'; expected auto, kk or lpt");
}

std::string_view to_string(Cardinality cardinality) {
  switch (cardinality) {
    case Cardinality::kFree:
      return "free";
    case Cardinality::kEqual:
      return "equal";
    case Cardinality::kBalanced:
      return "balanced";
  }
  return "?";
}

std::string_view to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kKK:
      return "kk";
    case Algorithm::kLPT:
      return "lpt";
  }
  return "?";
}

}  // namespace seqflow::balance
