#include "seqflow/error.h"
#include "transport/field_versions_codec.h"

namespace seqflow::transport::wire {

void add_sample_keys(MsgpackMapWriter& header, const SampleKeys& samples, std::span<const size_t> positions) {
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
  header.set("indexes").numbers(std::span<const int64_t>(indexes));
  header.set("partitions").strings(names);
  header.set("partition_ends").numbers(std::span<const uint64_t>(ends));
  if (!samples.generations.empty()) header.set("generations").numbers(std::span<const uint64_t>(generations));
  if (samples.write_version != 0) header.set("write_version").unsigned_integer(samples.write_version);
  if (samples.read_versions == nullptr || samples.read_versions->empty()) return;
  MsgpackMapWriter read_versions;
  std::vector<uint64_t> versions(positions.size());
  for (const auto& [field, all] : *samples.read_versions) {
    if (all.size() != samples.global_indexes.size()) {
      throw_invalid("read_versions of field \"" + field + "\" holds " + std::to_string(all.size()) + " versions for " +
                    std::to_string(samples.global_indexes.size()) + " global indexes; give one per index");
    }
    for (size_t i = 0; i < positions.size(); ++i) versions[i] = all[positions[i]];
    read_versions.set(field).numbers(std::span<const uint64_t>(versions));
  }
  read_versions.write(header.set("read_versions"));
}

PartitionIdList partition_runs(const EncodedMap& header, size_t samples) {
  const std::vector<std::string> names = header.texts("partitions");
  const auto ends = header.numbers<uint64_t>("partition_ends");
  if (names.size() != ends.size()) header.fail("partition_ends", "must hold one end per partition");
  PartitionIdList out;
  uint64_t begin = 0;
  for (size_t r = 0; r < names.size(); ++r) {
    if (ends[r] <= begin || ends[r] > samples) header.fail("partition_ends", "must ascend within the sample count");
    out.append(ends[r] - begin, names[r]);
    begin = ends[r];
  }
  if (begin != samples) header.fail("partition_ends", "must end at the sample count " + std::to_string(samples));
  return out;
}

SampleKeyColumns read_sample_keys(const EncodedMap& header) {
  SampleKeyColumns out;
  out.global_indexes = header.numbers<int64_t>("indexes");
  const size_t n = out.global_indexes.size();
  out.partitions = partition_runs(header, n);
  if (header.has("generations")) {
    out.generations = header.numbers<uint64_t>("generations");
    if (out.generations.size() != n) header.fail("generations", "must hold one generation per sample");
  }
  if (header.has("write_version")) out.write_version = header.unsigned_integer("write_version");
  if (header.has("read_versions")) out.read_versions = field_versions_at(header, "read_versions", n);
  return out;
}

}  // namespace seqflow::transport::wire
