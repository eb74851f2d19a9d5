// A storage unit's capacity as Prometheus lines: its limits and
// watermarks, usage per partition (with a per-partition limit), and what
// capacity did to puts (waiting, waited, refused).
#pragma once

#include <string>

#include "seqflow/storage.h"

namespace seqflow::server {

void append_capacity_metrics(const StorageUnit& storage, std::string& out);

}  // namespace seqflow::server
