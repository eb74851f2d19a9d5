// The controller as a service: a Controller behind a Service, the registry of
// the storage units (sample gi lives on unit (gi / 64) % N, units ordered by
// endpoint so that a restart in any order keeps the mapping), and the drop of
// released samples' data on those units before their indexes can be reused.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "server/checkpoint_root.h"
#include "server/deferred_waiters.h"
#include "server/insert_leases.h"
#include "server/lease_expiry.h"
#include "server/service.h"
#include "seqflow/controller.h"
#include "seqflow/limits.h"

namespace seqflow::server {

// The controller's default worker cap (ServiceOptions says 64): inserts
// waiting behind a clear's reuse gate hold a worker each, and jobs run
// hundreds of ranks. Blocking fetches and watches hold none (DeferredWaiters).
inline constexpr size_t kControllerDefaultMaxWorkers = 256;

// More samples than this in one insert request are refused: a typo must not
// make the controller allocate the machine away.
inline constexpr int64_t kMaxInsertPerRequest = int64_t{1} << 24;

struct ControllerServiceOptions {
  ServiceOptions service;
  ControllerOptions controller;
  // Clients wait until this many storage units have registered.
  size_t storage_units = 1;
  // A checkpoint directory (as written by save_checkpoint) to start from.
  std::string load_checkpoint;
  // Clients' save and load paths must lie under this directory; empty: anywhere.
  std::string checkpoint_root;
  // Security of the connections to the storage units (to drop released data).
  transport::ClientSecurity storage_security;
  std::chrono::milliseconds storage_timeout{30000};
  // A storage unit that has not registered (heartbeat: every second) for
  // this long is taken for dead: released data is not dropped there (it died
  // with the unit), so a dead unit does not stall clears and the inserts
  // waiting behind them.
  std::chrono::milliseconds storage_silence_limit{5000};
  // How long a put's inserted samples may stay unproduced before they are
  // reclaimed (InsertLeases): its producer died mid-put. 0: the put's own
  // budget (its client's timeout; it is over by then either way) plus
  // kInsertLeaseGrace, or kDefaultInsertLease for a client that sends none.
  std::chrono::milliseconds insert_lease{0};
};

inline constexpr std::chrono::milliseconds kInsertLeaseGrace{2000};
inline constexpr std::chrono::milliseconds kDefaultInsertLease{10 * 60 * 1000};

class ControllerService {
 public:
  explicit ControllerService(ControllerServiceOptions options);
  ~ControllerService();

  void start();
  void stop();
  std::string endpoint() const { return service_.endpoint(); }
  std::vector<std::string> ops() const { return service_.ops(); }  // the operations it answers
  MetricsRegistry& metrics() { return service_.metrics(); }
  Controller& controller() { return *controller_; }

 private:
  struct Units;
  void register_handlers();

  // The handlers, one per op of transport/control_protocol.h; the table in
  // register_handlers says which thread runs each.
  std::optional<transport::Frames> insert(const transport::Frames& args, bool may_wait);
  transport::Frames mark_produced(const transport::Frames& args);
  std::optional<transport::Frames> get_meta(const transport::Frames& args, bool may_wait);
  transport::Frames set_custom_meta(const transport::Frames& args);
  transport::Frames clear_samples(transport::Frames& args);
  transport::Frames reclaim_unproduced(transport::Frames& args);
  transport::Frames clear_partition(transport::Frames& args);
  transport::Frames kv_clear(transport::Frames& args);
  transport::Frames replay_pass(transport::Frames& args);
  std::optional<transport::Frames> watch(const transport::Frames& args, bool may_wait);
  transport::Frames ack_replay_pass(transport::Frames& args);
  transport::Frames reissue_inflight_prompts(transport::Frames& args);
  transport::Frames forget_partition_if_empty(const transport::Frames& args);
  transport::Frames reset_consumption(const transport::Frames& args);
  transport::Frames end_leases(transport::Frames& args);
  transport::Frames consumption_status(const transport::Frames& args);
  transport::Frames production_status(const transport::Frames& args);
  transport::Frames sample_production(const transport::Frames& args);
  transport::Frames all_consumed(const transport::Frames& args);
  transport::Frames all_produced(const transport::Frames& args);
  transport::Frames report_timing(const transport::Frames& args);
  transport::Frames task_workload(const transport::Frames& args);
  transport::Frames partition_list(const transport::Frames& args);
  transport::Frames kv_resolve(transport::Frames& args);
  transport::Frames kv_lookup(const transport::Frames& args);
  transport::Frames kv_find(const transport::Frames& args);
  transport::Frames kv_keys(const transport::Frames& args);
  transport::Frames kv_list(const transport::Frames& args);
  transport::Frames save(transport::Frames& args);
  transport::Frames load(transport::Frames& args);
  transport::Frames save_storage(transport::Frames& args);
  transport::Frames save_checkpoint(transport::Frames& args);
  transport::Frames load_storage(transport::Frames& args);
  transport::Frames register_storage(transport::Frames& args);
  transport::Frames storage_units(const transport::Frames& args);
  transport::Frames hello(const transport::Frames& args);
  transport::Frames set_policy_version(const transport::Frames& args);
  transport::Frames policy_version(const transport::Frames& args);
  transport::Frames policy_versions(const transport::Frames& args);

  // A clear's reply: release_and_drop's released indexes; `what` names the request.
  transport::Frames released_reply(const std::string& what, const std::function<std::vector<int64_t>()>& release);
  // Has every unit write its part of the storage checkpoint at `path`;
  // their fingerprints, in routing order.
  std::vector<uint64_t> save_units(const std::string& path);
  // Releases samples (`release`) under the reuse gate and drops their data on
  // the units; the released indexes. `request`: a handler's, checked still
  // open once the gate is taken (it may have waited behind another clear).
  std::vector<int64_t> release_and_drop(const std::function<std::vector<int64_t>()>& release,
                                        const std::string* request = nullptr);
  void add_metrics_collector();

  ControllerServiceOptions options_;
  CheckpointRoot checkpoint_root_;
  std::shared_ptr<Controller> controller_;
  std::unique_ptr<Units> units_;
  // Shared: calls that hand out global indexes. Exclusive: clears, until the
  // released samples' data is gone from the storage units.
  std::shared_mutex reuse_gate_;
  Service service_;
  // After service_: its waiters' replies go through it, so it goes first.
  std::unique_ptr<DeferredWaiters> waiters_;
  std::unique_ptr<InsertLeases> leases_;
  // Gives back what expired fetch leases held; goes before the waiters it tells.
  std::unique_ptr<LeaseExpiry> fetch_lease_expiry_;
};

}  // namespace seqflow::server
