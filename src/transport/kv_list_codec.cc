#include <memory>

#include "common/aligned_buffer.h"
#include "common/msgpack_writer.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::wire {
namespace {

// Every partition's keys and tags back to back, offsets running on across
// partitions; partition_ends says where each partition's keys end.
std::string kv_list_bytes(const std::vector<PartitionKeys>& listed) {
  size_t keys = 0, key_bytes = 0, tag_bytes = 0;
  for (const PartitionKeys& partition : listed) {
    keys += partition.size();
    key_bytes += partition.key_bytes().size();
    tag_bytes += partition.tag_bytes().size();
  }
  if (key_bytes > std::numeric_limits<uint32_t>::max() || tag_bytes > std::numeric_limits<uint32_t>::max()) {
    throw_invalid("kv_list reply exceeds 4 GiB of keys or tags: list one partition at a time");
  }
  std::vector<uint64_t> ends;
  std::vector<uint32_t> key_offsets{0}, tag_offsets{0};
  ends.reserve(listed.size());
  key_offsets.reserve(keys + 1);
  tag_offsets.reserve(keys + 1);
  auto append_shifted = [](std::vector<uint32_t>& to, const std::vector<uint32_t>& offsets) {
    const uint32_t shift = to.back();
    for (size_t i = 1; i < offsets.size(); ++i) to.push_back(offsets[i] + shift);
  };
  for (const PartitionKeys& partition : listed) {
    append_shifted(key_offsets, partition.key_offsets());
    append_shifted(tag_offsets, partition.tag_offsets());
    ends.push_back(key_offsets.size() - 1);
  }
  std::vector<uint64_t> versions;
  std::vector<uint8_t> unchanged;
  for (const PartitionKeys& partition : listed) {
    versions.insert(versions.end(), {partition.version().epoch, partition.version().changes});
    unchanged.push_back(partition.is_unchanged() ? 1 : 0);
  }
  MsgpackWriter out(256 + 64 * listed.size() + key_bytes + tag_bytes + 8 * (keys + 1));
  out.map(8);
  out.string("partitions");
  out.array(listed.size());
  for (const PartitionKeys& partition : listed) out.string(partition.partition_id());
  out.string("partition_ends");
  out.numbers(std::span<const uint64_t>(ends));
  out.string("versions");
  out.numbers(std::span<const uint64_t>(versions));
  out.string("unchanged");
  out.numbers(std::span<const uint8_t>(unchanged));
  std::vector<std::string_view> key_parts, tag_parts;
  for (const PartitionKeys& partition : listed) {
    key_parts.push_back(partition.key_bytes());
    tag_parts.push_back(partition.tag_bytes());
  }
  out.string("keys");
  out.binary(std::span<const std::string_view>(key_parts));
  out.string("key_offsets");
  out.numbers(std::span<const uint32_t>(key_offsets));
  out.string("tags");
  out.binary(std::span<const std::string_view>(tag_parts));
  out.string("tag_offsets");
  out.numbers(std::span<const uint32_t>(tag_offsets));
  return std::move(out).take();
}

// Each partition's listing views `bytes`, which `owner` keeps alive: 100k
// keys are not copied again. Tags are checked where they are decoded.
std::vector<PartitionKeys> kv_list_of(std::string_view bytes, const std::shared_ptr<const void>& owner,
                                      std::string_view what) {
  const EncodedMap header = encoded_header(
      bytes, what,
      {"partitions", "partition_ends", "versions", "unchanged", "keys", "key_offsets", "tags", "tag_offsets"});
  const std::vector<std::string> names = header.texts("partitions");
  const std::vector<uint64_t> ends = header.numbers<uint64_t>("partition_ends");
  if (names.size() != ends.size()) header.fail("partition_ends", "must hold one end per partition");
  const std::vector<uint64_t> versions = header.numbers<uint64_t>("versions");
  if (versions.size() != 2 * names.size()) header.fail("versions", "must hold an epoch and a count per partition");
  const std::vector<uint8_t> unchanged = header.numbers<uint8_t>("unchanged");
  if (unchanged.size() != names.size()) header.fail("unchanged", "must hold one flag per partition");
  const std::string_view keys = header.binary("keys"), tags = header.binary("tags");
  const std::vector<uint32_t> key_offsets = header.numbers<uint32_t>("key_offsets");
  const std::vector<uint32_t> tag_offsets = header.numbers<uint32_t>("tag_offsets");
  const uint64_t count = std::max<size_t>(key_offsets.size(), 1) - 1;
  // Partition p's slice [begin, end] of the offsets, rebased to 0.
  auto slice = [](const std::vector<uint32_t>& offsets, uint64_t begin, uint64_t end) {
    std::vector<uint32_t> out(offsets.begin() + static_cast<std::ptrdiff_t>(begin),
                              offsets.begin() + static_cast<std::ptrdiff_t>(end) + 1);
    for (uint32_t& offset : out) offset -= offsets[begin];
    return out;
  };
  // Every offset in its bytes and ascending, before any slice is taken.
  auto in_bounds = [](const std::vector<uint32_t>& offsets, std::string_view all) {
    return !offsets.empty() && offsets.front() == 0 && offsets.back() == all.size() &&
           std::is_sorted(offsets.begin(), offsets.end());
  };
  if (!in_bounds(key_offsets, keys)) {
    header.fail("key_offsets", "must ascend from 0 to the key bytes' count " + std::to_string(keys.size()));
  }
  if (tag_offsets.size() != key_offsets.size()) header.fail("tag_offsets", "must hold one offset per key, plus one");
  if (!in_bounds(tag_offsets, tags)) {
    header.fail("tag_offsets", "must ascend from 0 to the tag bytes' count " + std::to_string(tags.size()));
  }
  std::vector<PartitionKeys> out;
  out.reserve(names.size());
  uint64_t begin = 0;
  for (size_t p = 0; p < names.size(); ++p) {
    if (ends[p] < begin || ends[p] > count) header.fail("partition_ends", "must not descend nor pass the key count");
    const ListingVersion version{versions[2 * p], versions[2 * p + 1]};
    if (unchanged[p] > 1) header.fail("unchanged", "must hold flags of 0 or 1");
    if (unchanged[p] == 1) {
      if (ends[p] != begin) header.fail("unchanged", "names a partition listed with keys");
      out.push_back(PartitionKeys::unchanged(names[p], version));
      continue;
    }
    out.push_back(PartitionKeys::over(
        names[p], owner, keys.substr(key_offsets[begin], key_offsets[ends[p]] - key_offsets[begin]),
        slice(key_offsets, begin, ends[p]), tags.substr(tag_offsets[begin], tag_offsets[ends[p]] - tag_offsets[begin]),
        slice(tag_offsets, begin, ends[p])));
    out.back().set_version(version);
    begin = ends[p];
  }
  if (begin != count) header.fail("partition_ends", "must end at the key count " + std::to_string(count));
  return out;
}

}  // namespace

zmq::message_t kv_list_frame(const std::vector<PartitionKeys>& listed) { return frame_of(kv_list_bytes(listed)); }

MsgpackMapWriter kv_list_request(const std::string* partition_id, const std::map<std::string, ListingVersion>& known) {
  MsgpackMapWriter request;
  if (partition_id != nullptr) request.set("partition_id").string(*partition_id);
  if (known.empty()) return request;
  std::vector<std::string> names;
  std::vector<uint64_t> versions;
  for (const auto& [name, version] : known) {
    names.push_back(name);
    versions.insert(versions.end(), {version.epoch, version.changes});
  }
  request.set("known_partitions").strings(names);
  request.set("known_versions").numbers(std::span<const uint64_t>(versions));
  return request;
}

std::map<std::string, ListingVersion> read_known_listings(const EncodedMap& request) {
  std::map<std::string, ListingVersion> known;
  if (!request.has("known_partitions")) return known;
  const std::vector<std::string> names = request.texts("known_partitions");
  const std::vector<uint64_t> versions = request.numbers<uint64_t>("known_versions");
  if (versions.size() != 2 * names.size()) {
    request.fail("known_versions", "must hold an epoch and a count per known partition");
  }
  for (size_t i = 0; i < names.size(); ++i) known[names[i]] = ListingVersion{versions[2 * i], versions[2 * i + 1]};
  return known;
}

std::vector<PartitionKeys> read_kv_list(Frames& frames, size_t index, std::string_view what) {
  header_bytes(frames, index, what);  // there, or a clear error
  const std::shared_ptr<const Buffer> frame = buffer_of(std::move(frames[index]));
  return kv_list_of(std::string_view(reinterpret_cast<const char*>(frame->data), frame->size), frame, what);
}

}  // namespace seqflow::transport::wire
