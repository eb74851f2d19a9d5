// Replay passes kept under their caller's pass id (seqflow/replay.h): a
// retry gets the kept answer instead of a new pass, and a pass's selected
// prompts are held (no pass selects them) until the pass is acknowledged,
// which clears them, or its lease ends, which makes them sampleable again.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "seqflow/replay.h"

namespace seqflow::core {

// The most passes kept at once, over all partitions, unacknowledged (each
// holds its answer) and acknowledged (each only its id, until its lease ends,
// for an acknowledgement sent again): passing cannot grow the controller's
// memory past them; beyond either a pass that would be kept is refused until
// one is acknowledged or its lease ends.
inline constexpr size_t kMaxKeptReplayPasses = 1024;
inline constexpr size_t kMaxAcknowledgedReplayPasses = 64 * 1024;
// How long an acknowledged pass's id stays (at most its lease), for an
// acknowledgement sent again after a lost reply.
inline constexpr std::chrono::minutes kAcknowledgedReplayPassKept{10};

class ReplayLeases {
 public:
  using Clock = std::chrono::steady_clock;

  // A held prompt key's sample.
  struct Prompt {
    int64_t global_index = 0;
    uint64_t generation = 0;
  };
  using Id = std::pair<std::string, uint64_t>;  // partition, pass id
  using ExpiryIndex = std::set<std::pair<Clock::time_point, Id>>;
  struct Kept {
    // What was asked, so that an id sent again with another pass is refused.
    ReplayStep step = ReplayStep::kSample;
    int64_t global_steps = 0;
    int64_t batch_size = 0;
    ReplayPass answer;         // released empty: the first answer's caller dropped them
    std::vector<Prompt> held;  // the selected prompts, until acknowledged
    Clock::time_point expiry;
    bool acknowledged = false;             // then held is empty and the answer dropped
    bool restored = false;                 // from a checkpoint, which keeps no answer: a retry is refused
    ExpiryIndex::iterator expiry_entry{};  // once kept: its entry of the leases' expiry index
  };
  using KeptPasses = std::map<Id, Kept>;  // by partition and pass id
  // Per partition: held prompts, index -> generation.
  using Held = std::unordered_map<int64_t, uint64_t>;

  using HeldByPartition = std::map<std::string, Held>;

  // A pass ready to be kept: what keeping it allocates is allocated, so that
  // a caller stages it before changing anything else and keeps it after.
  class Staged {
    friend class ReplayLeases;
    KeptPasses::node_type pass_;
    ExpiryIndex::node_type expiry_;
    HeldByPartition::node_type new_held_;  // the prompts of a partition that holds none yet
    Held more_held_;                       // else, for the partition's held prompts (room reserved)
  };

  // The pass kept under the id in the partition, or null.
  const Kept* find(const std::string& partition_id, uint64_t pass_id) const;
  Kept* find(const std::string& partition_id, uint64_t pass_id);
  // Throws kInvalidArgument when kMaxKeptReplayPasses passes are kept
  // unacknowledged, or kMaxAcknowledgedReplayPasses acknowledged.
  void check_room() const;
  // Stages a pass under an id no pass is kept under (the caller checks
  // check_room first); nothing is kept until keep(). Nothing else may change
  // these leases between the two.
  Staged stage(const std::string& partition_id, uint64_t pass_id, Kept kept);
  // Keeps the staged pass and holds its prompts; allocates nothing.
  void keep(Staged staged) noexcept;
  // The partition's held prompts; null when none is.
  const Held* held(const std::string& partition_id) const;
  // Marks the kept pass (found by find()) acknowledged and releases the
  // prompts it held (none when acknowledged before). Allocates nothing: a
  // caller finds the pass, does what may fail, then acknowledges it.
  void acknowledge(Kept& kept) noexcept;
  // Ends the passes whose lease ended by `now`; what they held is sampleable
  // again, and returned per partition.
  std::vector<std::pair<std::string, std::vector<Prompt>>> expire(Clock::time_point now);
  // When the next kept pass's lease ends; nullopt when none is kept.
  std::optional<Clock::time_point> next_expiry() const;
  // Every kept pass, for a checkpoint.
  const KeptPasses& kept() const { return kept_; }
  // A pass read from a checkpoint: kept (past the room check: the checkpoint's
  // reader bounds them) and its prompts held.
  void restore(const std::string& partition_id, uint64_t pass_id, Kept kept);

 private:
  void release(const std::string& partition_id, const std::vector<Prompt>& prompts);

  KeptPasses kept_;
  // kept_ by lease end, so that expiring costs the ended passes, not the kept ones.
  ExpiryIndex by_expiry_;
  size_t acknowledged_ = 0;  // of kept_
  HeldByPartition held_;
};

}  // namespace seqflow::core
