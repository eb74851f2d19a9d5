// Samplers in Python: the C++ samplers as opaque handles, and an adapter
// that lets a Python object (seqflow.BaseSampler) act as a C++ Sampler.
#pragma once

#include <nanobind/nanobind.h>

namespace seqflow::bindings {

void bind_samplers(nanobind::module_ m);

}  // namespace seqflow::bindings
