// The versions a storage unit holds of one (global index, field): the
// committed value, if any, and writes staged beside it until their commit
// (seqflow/field_versions.h). Writes and commits never allocate, so that a
// put or a commit changes the values under the unit's lock without failing
// halfway; what leaves is handed back, so that its buffers are freed after
// the lock is released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "seqflow/tensor.h"

namespace seqflow {

class VersionedValue {
 public:
  using Versions = std::map<uint64_t, SampleView>;

  VersionedValue() = default;
  // One put's value: version 0 is unversioned, committed at once (it
  // replaces the committed value, staged ones stay); any other version is
  // staged. Allocates the one map node the value needs.
  VersionedValue(uint64_t version, SampleView view);

  // Held values (a count and their bytes) that a write of `incoming` (a
  // value made by the constructor) removes and adds here.
  struct Change {
    size_t values_out = 0;
    uint64_t bytes_out = 0;
    size_t values_in = 0;
    uint64_t bytes_in = 0;
  };
  Change change_of_write(const VersionedValue& incoming) const;
  // The write change_of_write describes. What it removes (or `incoming`'s
  // value, when a version at least as new is committed) is left in
  // `incoming`.
  void write(VersionedValue& incoming) noexcept;

  // Values a commit of `version` drops (the older ones); nullopt when it
  // does nothing: `version` is not held, or is not newer than the committed one.
  std::optional<size_t> drops_of_commit(uint64_t version) const;
  // Commits `version` if drops_of_commit says so; the dropped values go to
  // `dropped`, which has room for them.
  void commit(uint64_t version, std::vector<Versions::node_type>& dropped) noexcept;
  // Values a discard of `version` drops: 1 when it is staged (held, newer
  // than the committed one), else nullopt.
  std::optional<size_t> drops_of_discard(uint64_t version) const;
  // Drops `version` if drops_of_discard says so, into `dropped`, which has room.
  void discard(uint64_t version, std::vector<Versions::node_type>& dropped) noexcept;

  // The value a reader of `version` sees (seqflow/storage.h, SampleKeys::
  // read_versions); null when none.
  const SampleView* read(uint64_t version) const;

  const Versions& versions() const { return versions_; }
  const std::optional<uint64_t>& committed() const { return committed_; }
  uint64_t bytes() const;

  // A value loaded from a checkpoint, in any order: null, or what makes the
  // values so far impossible for a unit to have held.
  const char* restore(uint64_t version, bool committed, SampleView view);
  // Once every value is restored: null, or what is impossible about them.
  const char* restored_problem() const;

 private:
  Versions versions_;
  std::optional<uint64_t> committed_;  // none: only staged writes so far
};

}  // namespace seqflow
