#include "bindings/cached_attribute.h"

namespace nb = nanobind;

namespace seqflow::bindings {

nb::handle python_attribute(const char* module, const char* name) {
  return nb::object(nb::module_::import_(module).attr(name)).release();
}

}  // namespace seqflow::bindings
