// Write versions: an overwrite is staged on the storage units beside the
// committed value and becomes the value readers see only when the
// controller commits it (the highest version wins, per sample and field).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace seqflow {

// Per field, one version per sample (a BatchMeta's samples, in order): the
// committed write each sample's value is. 0: the first, unversioned write
// (a put of new samples), read as whatever the unit holds committed. Fields
// never overwritten are absent, so the common path carries nothing.
using FieldVersions = std::map<std::string, std::vector<uint64_t>>;

}  // namespace seqflow
