// The data plane of remote mode: storage services reached over ZeroMQ,
// sample gi on unit gi % N. A put or get fans out to the units at once (one
// request each, all sent before any reply is awaited). With local_copy on,
// units on this host move data through memory instead of TCP (see
// net/local_copy.h); a unit that cannot is sent the bytes from then on.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/connection.h"
#include "seqflow/storage.h"

namespace seqflow {

class ShardedStorage final : public DataPlane {
 public:
  // units[u]: the pool of unit u (ordered as the controller orders them).
  ShardedStorage(std::vector<std::shared_ptr<transport::ConnectionPool>> units, bool local_copy);

  void put(const SampleKeys& samples, const std::vector<Column>& columns) override;
  std::vector<std::vector<SampleView>> get(const SampleKeys& samples,
                                           std::span<const std::string> fields) const override;
  void clear(std::span<const int64_t> global_indexes) override;
  void clear_all() override;
  StorageStats stats() const override;
  // Unit u's file is path + ".unit<u>"; `path` itself lists them (written
  // here, read on load) so that a checkpoint directory's manifest covers it.
  void save(const std::string& path) const override;
  void load(const std::string& path) override;

 private:
  // Gives back the (unit, lease) pairs of a get's same-host replies once
  // copied; throws kTimeout if a unit had let one go (the copy may be torn).
  void give_back(const std::vector<std::pair<size_t, int64_t>>& leases) const;

  std::vector<std::shared_ptr<transport::ConnectionPool>> units_;
  // Per unit: may it still be tried? Cleared when it proves elsewhere.
  std::unique_ptr<std::atomic<bool>[]> local_copy_;
};

}  // namespace seqflow
