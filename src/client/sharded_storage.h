// The data plane of remote mode: storage services reached over ZeroMQ,
// sample gi on unit (gi / 64) % N (transport/storage_routing.h). A put, get or commit fans out to the units at once
// (one request each, all sent before any reply is awaited). With local_copy on, units on this host move data through
// memory instead of TCP, within a session opened with each unit (transport/local_copy_session.h); a unit that cannot is
// sent the bytes from then on.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "transport/connection.h"
#include "transport/local_copy_session.h"
#include "seqflow/storage.h"

namespace seqflow {

class ShardedStorage final : public DataPlane {
 public:
  // units[u]: the pool of unit u (ordered as the controller orders them).
  // Checkpoints of the units go through the controller (a unit saves and
  // loads for no one else).
  ShardedStorage(std::vector<std::shared_ptr<transport::ConnectionPool>> units,
                 std::shared_ptr<transport::ConnectionPool> controller, bool local_copy);

  void put(const SampleKeys& samples, const std::vector<Column>& columns) override;
  std::vector<std::vector<SampleView>> get(const SampleKeys& samples,
                                           std::span<const std::string> fields) const override;
  // To the units that hold the samples, at once.
  void commit(const SampleKeys& samples, std::span<const std::string> fields) override;
  void discard(const SampleKeys& samples, std::span<const std::string> fields) override;
  // Refused: a unit drops data only for its controller (clear_samples,
  // clear_partition and kv_clear drop released data there).
  void clear(std::span<const int64_t> global_indexes) override;
  void clear_generations(std::span<const int64_t> global_indexes, std::span<const uint64_t> generations) override;
  void clear_all() override;
  StorageStats stats() const override;
  // Unit u's file is path + ".unit<u>" (storage_unit_file), written and read
  // by the unit at the controller's request; `path` itself lists their
  // fingerprints (written here, read on load) so that a checkpoint
  // directory's manifest covers them.
  void save(const std::string& path) const override;
  // A whole checkpoint in one cut: the controller writes its own file at
  // `controller_path` and has every unit write its part of `storage_path`
  // while it holds inserts, clears and loads; then the index as save() does.
  void save_with_controller(const std::string& controller_path, const std::string& storage_path) const;
  void load(const std::string& path) override;

 private:
  // Unit u's share of a put, with the ticket of its place in line there.
  using PutRequest = std::function<transport::Frames(size_t, const std::optional<StorageUnit::Ticket>&)>;
  // put: asks the units in `full` (unit -> its "storage full" answer and
  // ticket) again whether the put (`retried_as(unit)`) fits, and sends
  // `request` once it does, until they stored their share or the put's
  // deadline passed (then kInvalidArgument, the last answer, saying it
  // waited). Each pause goes through samples.around_wait.
  void wait_for_room(const SampleKeys& samples, std::map<size_t, StorageUnit::Full>& full,
                     const std::function<StorageUnit::RetriedPut(size_t)>& retried_as, const PutRequest& request) const;
  // A put that gave up tells the units in `full` to give its places in
  // line to the puts behind it.
  void leave_lines(const std::map<size_t, StorageUnit::Full>& full,
                   const std::function<StorageUnit::RetriedPut(size_t)>& retried_as) const;
  // commit and discard: op to every unit holding some of the samples.
  void settle_version(std::string_view op, const SampleKeys& samples, std::span<const std::string> fields);
  // Writes the index of a storage checkpoint from the units' fingerprints
  // (a save_storage or save_checkpoint reply).
  void write_index(const std::string& path, const std::vector<uint64_t>& fingerprints) const;
  // Gives back the (unit, lease) pairs of a get's same-host replies once
  // copied; throws kTimeout if a unit had let one go (the copy may be torn).
  void give_back(const std::vector<std::pair<size_t, uint64_t>>& leases) const;

  // Unit u's open same-host session, opened on first use (again after the
  // unit restarted, or in a forked child); null once local copy with that
  // unit proved impossible (local_copy_[u] is then false).
  std::shared_ptr<const transport::local_copy::Session> session_for(size_t unit) const;

  std::vector<std::shared_ptr<transport::ConnectionPool>> units_;
  std::shared_ptr<transport::ConnectionPool> controller_;
  // Per unit: may it still be tried? Cleared when it proves elsewhere.
  std::unique_ptr<std::atomic<bool>[]> local_copy_;
  mutable std::mutex sessions_mutex_;
  mutable std::vector<std::shared_ptr<const transport::local_copy::Session>> sessions_;
};

}  // namespace seqflow
