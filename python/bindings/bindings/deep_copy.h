// copy.deepcopy for the Python layer's plain values (python/bindings/deep_copy.cc).
#pragma once

#include <nanobind/nanobind.h>

namespace seqflow::bindings {

// copy.deepcopy(value): dicts and lists of numbers, strings, bytes and None
// copied in C++, anything else by copy.deepcopy with the same memo.
nanobind::object deep_copy(nanobind::handle value);

}  // namespace seqflow::bindings
