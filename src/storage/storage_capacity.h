// A storage unit's limits (StorageOptions): the unit's usage and, with a
// per-partition limit, each partition's; the watermarks' hysteresis; and
// the words of a refusal ("storage full: ..."). Not thread-safe: the unit
// calls it under its lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "seqflow/storage.h"

namespace seqflow::storage {

// Samples, and bytes of values plus their bookkeeping.
struct Usage {
  uint64_t samples = 0;
  uint64_t bytes = 0;
};

// What a put adds to a scope and what it releases there (values it replaces).
struct UsageChange {
  Usage in;
  Usage out;
};

// A put's change per partition (only counted with a per-partition limit).
using PartitionChanges = std::map<std::string, UsageChange, std::less<>>;

// Room taken by the puts that wait for it ahead of a put (FIFO): what they
// add, in the unit and per partition (with a per-partition limit).
struct Reserved {
  Usage unit;
  std::map<std::string, Usage, std::less<>> partitions;

  // Adds a waiting put's change (what it adds beyond what it releases).
  void add(const UsageChange& total, const PartitionChanges& partitions);
};

// Why a put does not fit, and whether waiting can help.
struct Refusal {
  std::string message;  // "storage full: ..."
  bool never_fits;      // larger than the limit (at its high watermark) even when empty
};

class StorageCapacity {
 public:
  explicit StorageCapacity(const StorageOptions& options);  // options checked (check_storage_options)

  bool counts_partitions() const { return per_partition_; }

  // nullopt: a put changing the unit's usage `held` by `total`, and its
  // partitions' by `partitions`, fits beside the room `reserved` for the
  // puts waiting ahead of it. Otherwise why not; a limit it finds full stops
  // admitting puts until its usage falls to the low watermark.
  std::optional<Refusal> refusal(const Usage& held, const UsageChange& total, const PartitionChanges& partitions,
                                 const Reserved& reserved, std::string_view requester);
  // Counts a stored put's change per partition. May throw (a new
  // partition's entry) only before it changes anything.
  void add(const PartitionChanges& partitions);
  // Counts what a clear, commit or discard released.
  void release(const std::string& partition, const Usage& freed);
  // Drops the counts and the hysteresis (clear_all). Allocates nothing.
  void clear() noexcept;
  // The capacity of `options` counting `partitions` (a load's), hysteresis
  // open: made before the load's swap, which then only moves it in.
  static StorageCapacity of_content(const StorageOptions& options,
                                    const std::unordered_map<std::string, Usage>& partitions);
  // Throws kInvalidArgument naming the limit and the partition when one of
  // `partitions` (a load's whole content) holds more than a per-partition limit.
  void check_partitions(const std::unordered_map<std::string, Usage>& partitions, std::string_view requester) const;

  std::vector<StorageUnit::PartitionUsage> partition_usage() const;

 private:
  struct Scope {
    Usage usage;
    bool bytes_filled = false;  // a put found it full: closed until the low watermark
    bool samples_filled = false;
  };
  // One limit (0: none) of one scope: `partition`'s, or (null) the unit's.
  std::optional<Refusal> check(std::string_view limit_name, const std::string* partition, uint64_t limit, bool& filled,
                               uint64_t used, uint64_t released, uint64_t reserved, uint64_t requested,
                               std::string_view unit, std::string_view requester) const;

  StorageOptions options_;
  double low_watermark_;
  bool per_partition_;
  Scope unit_;  // its usage is the unit's StorageStats: only its hysteresis here
  std::unordered_map<std::string, Scope> partitions_;
};

}  // namespace seqflow::storage
