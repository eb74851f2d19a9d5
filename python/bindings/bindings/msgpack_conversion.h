// MessagePack -> Python objects in one pass, for custom_meta: building the
// Python values straight from the parser's events skips the JSON tree that a
// decode-then-convert path would build and throw away for every sample.
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <string_view>

namespace seqflow::bindings {

// The value `bytes` encodes (empty bytes: an empty dict). On malformed
// input: an invalid object, and `error` says why.
nanobind::object from_msgpack(std::string_view bytes, std::string& error);

}  // namespace seqflow::bindings
