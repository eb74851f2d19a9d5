// Samplers in Python: the C++ samplers as opaque handles, their factories
// and direct calls (seqflow.samplers' built-in classes hold them), and an
// adapter that lets a Python object (seqflow.BaseSampler) act as a C++ Sampler.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>

#include "seqflow/sampler.h"

namespace seqflow::bindings {

void bind_samplers(nanobind::module_ m);
// The C++ samplers behind SequentialSampler ... TokenBudgetSampler, and their direct calls (builtin_samplers.cc).
void bind_builtin_samplers(nanobind::module_ m);

// A C++ sampler that calls target.sample(ready_indexes, batch_size, **kwargs).
std::shared_ptr<Sampler> python_sampler(nanobind::object target);

}  // namespace seqflow::bindings
