// The int64 arrays of the bound methods that still take user input as it
// comes (Workload.seconds): converted by seqflow._arrays.as_int64_array, the
// one conversion, whose errors name the parameter, the index and the value.
#include <nanobind/stl/string.h>

#include <string>

#include "bindings/arrays.h"
#include "bindings/cached_attribute.h"

namespace nb = nanobind;

namespace seqflow::bindings {

Int64Input int64_input(nb::handle values, const std::string& name, bool allow_negative) {
  static CachedAttribute as_int64_array("seqflow._arrays", "as_int64_array");
  return nb::cast<Int64Input>(as_int64_array(values, name, allow_negative));
}

}  // namespace seqflow::bindings
