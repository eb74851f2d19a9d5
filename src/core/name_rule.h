// The one rule for names (fields, partition ids, keys, task names), the
// controller's guard for callers other than the Python client, which checks
// the same rule first (seqflow/_checks.py): a name is non-empty, at most
// kMaxNameBytes bytes of valid UTF-8 (no encoded surrogates) and holds no
// NUL, which C strings, and so Python dict keys made from them, cut off.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "seqflow/limits.h"

namespace seqflow::core {

// Throws kInvalidArgument "<parameter> <problem>, got '<name>'" (non-printable
// bytes escaped as \xNN, a long name shortened).
void check_name(std::string_view name, const std::string& parameter);

}  // namespace seqflow::core
