// extra_info of joined batches (python/bindings/extra_info.cc).
#pragma once

#include <nanobind/nanobind.h>

#include <string>

namespace seqflow::bindings {

// The union of the parts' extra_info dicts (`owner`.concat names the joins in
// messages); a key with different values in two parts raises ValueError.
nanobind::dict merged_extra_info(nanobind::list infos, const std::string& owner);

}  // namespace seqflow::bindings
