// The element types the engine stores, by name (seqflow/tensor.h), for the
// Python checks of the tensors a put is given (seqflow._columns.DTYPES).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "bindings/submodules.h"
#include "common/dtype_code.h"
#include "seqflow/tensor.h"

namespace nb = nanobind;

namespace seqflow::bindings {

void bind_dtype_names(nb::module_ m) {
  std::vector<std::string> names;
  for (uint8_t code = 0; code < kDTypeCount; ++code) names.emplace_back(dtype_name(static_cast<DType>(code)));
  m.attr("DTYPES") = nb::tuple(nb::cast(names));
}

}  // namespace seqflow::bindings
