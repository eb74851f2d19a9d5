// Checks of seqflow.Client's compound arguments: sampling_config, custom_meta
// and kv tags. Messages name the parameter and the value (bindings/checks.h).
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <vector>

#include "seqflow/sampler.h"

namespace seqflow::bindings {

// get_meta's sampling_config: dp_rank (when given), batch_index, and the other keys for the sampler.
SamplingConfig sampling_config_of(nanobind::handle sampling_config);
// put's custom_meta: None, or a list of dicts (one per sample), as a list.
nanobind::object checked_custom_meta(nanobind::handle custom_meta);
// kv_batch_put's tags: None, or one tag per key, as a list.
nanobind::object checked_tags(nanobind::handle tags, size_t keys);
// An iterable of str (names already checked) as strings.
std::vector<std::string> strings(nanobind::handle values);

}  // namespace seqflow::bindings
