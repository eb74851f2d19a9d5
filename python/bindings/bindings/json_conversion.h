// Python values <-> seqflow::Value, for custom metadata, kv tags and sampler state.
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include "seqflow/value.h"

namespace seqflow::bindings {

// ints, floats, strings, bools, None, lists / tuples and dicts with string
// keys (numpy integer and float scalars count as ints and floats). Anything
// else throws kInvalidArgument naming `where` and the key path, e.g.
// `custom_meta[3]["scores"][1]`; so do containers nested deeper than
// kMaxJsonDepth (a list that holds itself included), before the recursion
// could exhaust the stack.
inline constexpr size_t kMaxJsonDepth = 1000;
Value to_value(nanobind::handle value, const std::string& where);

nanobind::object from_value(const Value& value);

}  // namespace seqflow::bindings
