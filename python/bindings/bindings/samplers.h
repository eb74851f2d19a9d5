// Samplers in Python: the C++ samplers as opaque handles and as the built-in
// sampler classes, an adapter that lets a Python object (seqflow.BaseSampler)
// act as a C++ Sampler, and the samplers' caches in TransferQueue's layouts.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>

#include "seqflow/sampler.h"

namespace seqflow::bindings {

void bind_samplers(nanobind::module_ m);
// SequentialSampler ... TokenBudgetSampler (builtin_samplers.cc).
void bind_builtin_samplers(nanobind::module_ m);

// A C++ sampler that calls target.sample(ready_indexes, batch_size, **kwargs).
std::shared_ptr<Sampler> python_sampler(nanobind::object target);

// The answer `states` (TransferQueue's `_states[partition_id][task_name][dp_rank][batch_index]`)
// holds for this caller's (dp_rank, batch_index), or None.
nanobind::object cached(nanobind::handle states, nanobind::handle partition_id, nanobind::handle task_name,
                        nanobind::handle sampling_config);
// A built-in sampler's state() reservations in `_states`' layout; entries are
// (sampled, consumed) pairs when `pairs`, else the sampled list.
nanobind::dict reservation_states(nanobind::handle state, bool pairs);
// {(partition_id, task_name, batch_index): [samples of rank 0, rank 1, ...]}.
nanobind::dict reservation_cache(nanobind::handle state);

}  // namespace seqflow::bindings
