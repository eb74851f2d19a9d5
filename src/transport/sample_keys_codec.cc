#include "seqflow/error.h"
#include "transport/encoded_map.h"
#include "transport/field_versions_codec.h"

namespace seqflow::transport::wire {

void add_sample_keys(Json& header, const SampleKeys& samples, std::span<const size_t> positions) {
  std::vector<int64_t> indexes;
  std::vector<uint64_t> generations;
  PartitionIdList partitions;
  indexes.reserve(positions.size());
  for (const size_t p : positions) {
    indexes.push_back(samples.global_indexes[p]);
    partitions.push_back(samples.partitions[p]);
    if (!samples.generations.empty()) generations.push_back(samples.generations[p]);
  }
  std::vector<std::string> names;
  std::vector<uint64_t> ends;
  for (size_t r = 0; r < partitions.run_count(); ++r) {
    names.push_back(partitions.run_name(r));
    ends.push_back(partitions.run_end(r));
  }
  header["indexes"] = binary_of(std::span<const int64_t>(indexes));
  header["partitions"] = std::move(names);
  header["partition_ends"] = binary_of(std::span<const uint64_t>(ends));
  if (!samples.generations.empty()) header["generations"] = binary_of(std::span<const uint64_t>(generations));
  if (samples.write_version != 0) header["write_version"] = samples.write_version;
  if (samples.read_versions == nullptr || samples.read_versions->empty()) return;
  Json read_versions = Json::object();
  std::vector<uint64_t> versions(positions.size());
  for (const auto& [field, all] : *samples.read_versions) {
    if (all.size() != samples.global_indexes.size()) {
      throw_invalid("read_versions of field \"" + field + "\" holds " + std::to_string(all.size()) + " versions for " +
                    std::to_string(samples.global_indexes.size()) + " global indexes; give one per index");
    }
    for (size_t i = 0; i < positions.size(); ++i) versions[i] = all[positions[i]];
    read_versions[field] = binary_of(std::span<const uint64_t>(versions));
  }
  header["read_versions"] = std::move(read_versions);
}

SampleKeyColumns read_sample_keys(const Header& header) {
  SampleKeyColumns out;
  out.global_indexes = header.numbers<int64_t>("indexes");
  const size_t n = out.global_indexes.size();
  out.partitions = partition_runs(header, n);
  if (header.has("generations")) {
    out.generations = header.numbers<uint64_t>("generations");
    if (out.generations.size() != n) header.fail("generations", "must hold one generation per sample");
  }
  if (header.has("write_version")) {
    const Json& version = header.at("write_version");
    if (!version.is_number_unsigned()) {
      // Never dump(): a peer's string may not be UTF-8.
      const std::string got =
          version.is_number_integer() ? std::to_string(version.get<int64_t>()) : std::string(version.type_name());
      header.fail("write_version", "must be an unsigned integer, got " + got);
    }
    out.write_version = version.get<uint64_t>();
  }
  if (header.has("read_versions")) out.read_versions = field_versions_at(header, "read_versions", n);
  return out;
}

}  // namespace seqflow::transport::wire
