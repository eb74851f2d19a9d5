#include "server/controller_service.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "core/change_log.h"
#include "durable/checkpoint_directory.h"
#include "transport/connection.h"
#include "transport/control_protocol.h"
#include "transport/storage_protocol.h"
#include "transport/storage_routing.h"
#include "transport/write_tag.h"
#include "seqflow/error.h"
#include "server/controller_waits.h"
#include "server/handler_table.h"
#include "server/owed_drops.h"
#include "server/workload_metrics.h"

namespace seqflow::server {
namespace {

namespace control = transport::control;
namespace storage_protocol = transport::storage_protocol;
using transport::storage_unit_file;
using transport::wire::request_name;

// kMaxInsertPerRequest, checked before the controller allocates anything.
int64_t checked_insert_count(int64_t count, const char* parameter) {
  if (count > kMaxInsertPerRequest) {
    throw_invalid(std::string(parameter) + " " + std::to_string(count) + " exceeds the limit of " +
                  std::to_string(kMaxInsertPerRequest) + " samples per insert request; insert in batches");
  }
  return count;
}

// When an insert's samples, unproduced by then, are reclaimed: see
// ControllerServiceOptions::insert_lease.
std::chrono::steady_clock::time_point lease_expiry(std::chrono::milliseconds insert_lease,
                                                   std::optional<std::chrono::milliseconds> budget,
                                                   std::chrono::steady_clock::time_point received) {
  if (insert_lease.count() > 0) return received + insert_lease;
  if (!budget) return received + kDefaultInsertLease;
  return received + *budget + kInsertLeaseGrace;
}

// A blocking fetch (or watch) waits no longer than its client does, less a
// margin for the reply's way back: a batch handed out after the client gave
// up would be consumed and received by nobody. kTimeout, with `refusal`,
// when no time is left.
std::chrono::steady_clock::time_point wait_deadline(std::chrono::milliseconds timeout, const char* refusal) {
  constexpr auto kLongestWait = std::chrono::hours(24 * 365);
  const auto now = std::chrono::steady_clock::now();
  auto deadline = now + std::min<std::chrono::milliseconds>(timeout, kLongestWait);
  const auto client_deadline = request_deadline();
  if (!client_deadline) return deadline;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*client_deadline - now);
  const auto margin = std::min(left / 10, std::chrono::milliseconds(500));
  if (left - margin <= std::chrono::milliseconds(0)) throw Error(ErrorCode::kTimeout, refusal);
  return std::min(deadline, now + (left - margin));
}

// Takes the reuse gate, waiting for it or (may_wait false) only if free now.
bool take(std::shared_lock<std::shared_mutex>& gate, bool may_wait) {
  if (!may_wait) return gate.try_lock();
  gate.lock();
  return true;
}

// Prometheus label values: backslash, quote and newline escaped.
std::string label(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

// The registered storage units, by endpoint, with a connection pool each.
struct ControllerService::Units {
  using Clock = std::chrono::steady_clock;

  std::mutex mutex;
  std::vector<std::string> endpoints;  // sorted: the unit of gi is endpoints[transport::unit_of(gi, N)]
  std::map<std::string, std::shared_ptr<transport::ConnectionPool>> pools;
  std::map<std::string, Clock::time_point> last_seen;
  // The instance id each unit last registered with (units that send one).
  std::map<std::string, uint64_t> instances;
  // The admin token each unit last registered with: its clear, save and load
  // carry it (the unit serves them to no one else).
  std::map<std::string, std::string> admin_tokens;
  // Units that restarted before every unit had registered (so before the
  // routing existed): their samples are forgotten once it does.
  std::set<std::string> restarted;
  // Drops a unit did not confirm (silent, cut off, failing), by endpoint:
  // sent when it registers again, by generation, so that data a newer
  // sample put under a reused index stays. Forgotten when the unit restarts
  // (its data went with it).
  OwedDrops owed;
  Gauge* owed_drops = nullptr;
  std::shared_ptr<zmq::context_t> context = std::make_shared<zmq::context_t>(1);
  Counter* drop_failures = nullptr;
  Counter* restarts = nullptr;

  // Per unit in routing order, the tag it takes to settle `version`
  // (transport/write_tag.h); none before every unit has registered.
  std::vector<uint64_t> write_tags(uint64_t version, size_t expected) {
    std::lock_guard lock(mutex);
    std::vector<uint64_t> out;
    if (endpoints.size() != expected) return out;
    out.reserve(endpoints.size());
    for (const std::string& endpoint : endpoints)
      out.push_back(transport::write_tag(admin_tokens.at(endpoint), version));
    return out;
  }

  transport::control::StorageUnitsReply listing(size_t expected) {
    std::lock_guard lock(mutex);
    return {endpoints, static_cast<int64_t>(expected), std::nullopt};
  }

  // A unit's registration (every heartbeat): the first one joins it, up to
  // the expected count. A unit that comes back with another instance id
  // restarted empty: every sample routed to it (transport::unit_of, N units in
  // endpoint order) lost its data, so the controller forgets their production until
  // they are put again. Under the units' lock (then the controller's; nothing
  // takes them the other way round), so that joins and restarts are seen in
  // one order; not under the reuse gate, which a clear may hold for long.
  void heartbeat(const std::string& endpoint, std::optional<uint64_t> instance, const std::string& admin_token,
                 const ControllerServiceOptions& options, Controller& controller) {
    std::lock_guard lock(mutex);
    const size_t expected = options.storage_units;
    if (!pools.count(endpoint)) {
      if (endpoints.size() >= expected) {
        throw_invalid("storage unit " + endpoint + " cannot join: all " + std::to_string(expected) +
                      " storage units have registered (" + endpoints.front() +
                      ", ...); start the controller with more storage units");
      }
      transport::ConnectionOptions connection{.timeout = options.storage_timeout, .security = options.storage_security};
      pools.emplace(endpoint, std::make_shared<transport::ConnectionPool>(context, endpoint, connection));
      endpoints.insert(std::upper_bound(endpoints.begin(), endpoints.end(), endpoint), endpoint);
    }
    // A unit's token changes only with its instance (a restart): another
    // token for the same instance is a peer posing as the unit, refused so
    // that it cannot lock the controller out of the unit's clears and saves.
    const auto known_token = admin_tokens.find(endpoint);
    const auto known_instance = instances.find(endpoint);
    if (known_token != admin_tokens.end() && known_token->second != admin_token &&
        (!instance || known_instance == instances.end() || known_instance->second == *instance)) {
      throw Error(ErrorCode::kPermissionDenied,
                  "register_storage for " + endpoint + " refused: another admin token for the same unit instance");
    }
    last_seen[endpoint] = Clock::now();
    admin_tokens[endpoint] = admin_token;
    if (instance) {
      auto [known, first] = instances.try_emplace(endpoint, *instance);
      if (!first && known->second != *instance) {
        known->second = *instance;
        restarted.insert(endpoint);
        owed.forget(endpoint);
        owed_drops->set(static_cast<double>(owed.size()));
        restarts->increment();
      }
    }
    // Before every unit has registered, a sample has no unit yet.
    if (restarted.empty() || endpoints.size() != expected) return;
    const size_t units = expected;
    for (const std::string& unit : restarted) {
      const auto place =
          static_cast<size_t>(std::lower_bound(endpoints.begin(), endpoints.end(), unit) - endpoints.begin());
      controller.forget_production(nullptr,
                                   [place, units](int64_t gi) { return transport::unit_of(gi, units) == place; });
    }
    restarted.clear();
  }

  // A unit as the controller calls it: its pool (null when silent past the
  // limit) and the admin token its calls carry.
  struct Target {
    std::shared_ptr<transport::ConnectionPool> pool;
    std::string admin_token;
    std::string endpoint;
  };

  // The units in routing order. Before every expected unit has registered
  // (e.g. just after a restart) no routing exists: kTimeout, asked before
  // anything is released.
  std::vector<Target> targets(size_t expected, std::chrono::milliseconds silence_limit) {
    std::lock_guard lock(mutex);
    if (endpoints.size() != expected) {
      throw Error(ErrorCode::kTimeout, std::to_string(endpoints.size()) + " of " + std::to_string(expected) +
                                           " storage units have registered; retry once they have");
    }
    std::vector<Target> out;
    const auto now = Clock::now();
    for (const auto& endpoint : endpoints) {
      const bool silent = now - last_seen.at(endpoint) > silence_limit;
      out.push_back({silent ? nullptr : pools.at(endpoint), admin_tokens.at(endpoint), endpoint});
    }
    return out;
  }

  // targets() for calls every unit must answer (saves, loads): a silent unit
  // fails the call at once (kTimeout) instead of holding it, and with it the
  // reuse gate, for the storage timeout.
  std::vector<Target> answering(size_t expected, std::chrono::milliseconds silence_limit) {
    std::vector<Target> units = targets(expected, silence_limit);
    for (size_t u = 0; u < units.size(); ++u) {
      if (!units[u].pool) {
        throw Error(ErrorCode::kTimeout, "storage unit " + std::to_string(u) + " has not registered for " +
                                             std::to_string(silence_limit.count()) + " ms; retry once it is back");
      }
    }
    return units;
  }

  // Sends each unit its request (given the unit's admin token) at once,
  // then takes every reply in routing order; the first failure is rethrown
  // once all are in. For the controller's own ops: saves and loads.
  static std::vector<transport::Frames> call_each(
      const std::vector<Target>& units, std::string_view op,
      const std::function<transport::Frames(size_t unit, const std::string& admin_token)>& request,
      std::chrono::milliseconds timeout) {
    std::vector<transport::ConnectionPool::Lease> leases;
    std::vector<uint64_t> ids;
    const auto deadline = transport::Connection::Clock::now() + timeout;
    for (size_t u = 0; u < units.size(); ++u) {
      leases.push_back(units[u].pool->acquire());
      ids.push_back(leases.back()->send(op, request(u, units[u].admin_token), deadline));
    }
    std::vector<transport::Frames> replies;
    std::optional<Error> failure;
    for (size_t u = 0; u < units.size(); ++u) {
      try {
        replies.push_back(leases[u]->receive(ids[u], deadline));
      } catch (const Error& e) {
        if (!failure) failure = Error(e.code(), "storage unit " + std::to_string(u) + ": " + e.what());
        replies.emplace_back();
      }
    }
    if (failure) throw *failure;
    return replies;
  }

  // Drops the released samples' data on their units, by generation, so
  // that a drop that arrives late (a link that came back) never touches data
  // a newer sample put under a reused index. The caller holds the reuse gate
  // exclusively, so each call waits at most `timeout` (a unit that died
  // moments ago must not hold every insert for the storage timeout). A
  // silent or failing unit is counted, not fatal: if it died, its data went
  // with it; if it was only cut off, it owes the drop, sent when it
  // registers again (settle_owed).
  void drop(const std::vector<Target>& targets, const std::vector<int64_t>& released, const Controller& controller,
            std::chrono::milliseconds timeout) {
    if (released.empty()) return;
    // Read under the gate: no insert has handed these indexes out again.
    const std::vector<uint64_t> generations = controller.last_generations(released);
    const auto shards = transport::shard_indexes(released, targets.size());
    for (size_t u = 0; u < targets.size(); ++u) {
      const std::vector<int64_t>& indexes = shards[u].global_indexes;
      if (indexes.empty()) continue;
      std::vector<uint64_t> unit_generations;
      unit_generations.reserve(indexes.size());
      for (const size_t p : shards[u].positions) unit_generations.push_back(generations[p]);
      try {
        if (!targets[u].pool) throw Error(ErrorCode::kTimeout, "storage unit is silent");
        targets[u].pool->call(
            storage_protocol::kClear,
            storage_protocol::encode_clear_request({indexes, unit_generations, targets[u].admin_token}), timeout);
      } catch (const Error&) {
        drop_failures->increment();
        std::lock_guard lock(mutex);
        owed.add(targets[u].endpoint, indexes, unit_generations);
        owed_drops->set(static_cast<double>(owed.size()));
      }
    }
  }

  // What `endpoint` owes, sent now (it just registered); kept on failure,
  // unless the unit restarted meanwhile.
  void settle_owed(const std::string& endpoint, std::chrono::milliseconds timeout) {
    OwedDrops::Debt debt;
    std::shared_ptr<transport::ConnectionPool> pool;
    std::string admin_token;
    std::optional<uint64_t> instance;
    {
      std::lock_guard lock(mutex);
      debt = owed.take(endpoint);
      if (debt.indexes.empty()) return;
      owed_drops->set(static_cast<double>(owed.size()));
      pool = pools.at(endpoint);
      admin_token = admin_tokens.at(endpoint);
      if (const auto known = instances.find(endpoint); known != instances.end()) instance = known->second;
    }
    try {
      pool->call(storage_protocol::kClear,
                 storage_protocol::encode_clear_request({debt.indexes, debt.generations, admin_token}), timeout);
    } catch (const Error&) {
      std::lock_guard lock(mutex);
      const auto known = instances.find(endpoint);
      const std::optional<uint64_t> now = known != instances.end() ? std::optional(known->second) : std::nullopt;
      if (now != instance) return;  // restarted: its data went with it
      owed.add(endpoint, debt.indexes, debt.generations);
      owed_drops->set(static_cast<double>(owed.size()));
    }
  }
};

ControllerService::ControllerService(ControllerServiceOptions options)
    : options_(std::move(options)),
      checkpoint_root_(options_.checkpoint_root),
      controller_(std::make_shared<Controller>(options_.controller)),
      units_(std::make_unique<Units>()),
      service_(options_.service) {
  if (options_.storage_units == 0) throw_invalid("storage_units must be at least 1, got 0");
  if (!options_.load_checkpoint.empty()) {
    controller_->start_from(durable::open_checkpoint_directory(options_.load_checkpoint).controller);
  }
  units_->owed_drops = &service_.metrics().gauge(
      "seqflow_storage_owed_drops", "Released samples' data a storage unit owes a drop of, until it registers again");
  units_->drop_failures = &service_.metrics().counter(
      "seqflow_storage_drop_failures_total", "Released samples whose data a storage unit did not confirm dropping");
  waiters_ = std::make_unique<DeferredWaiters>(*controller_);
  fetch_lease_expiry_ = std::make_unique<LeaseExpiry>(*controller_);
  Counter& reclaimed = service_.metrics().counter(
      "seqflow_insert_samples_reclaimed_total",
      "Samples a put inserted and never marked produced within its lease (its producer died mid-put): removed");
  leases_ = std::make_unique<InsertLeases>(
      [this, &reclaimed](const std::string& partition_id, const std::vector<int64_t>& indexes,
                         const std::vector<uint64_t>& generations, bool made_partition) {
        const auto released =
            release_and_drop([&] { return controller_->reclaim_unproduced(partition_id, indexes, generations); });
        if (released.empty()) return;
        reclaimed.increment(static_cast<double>(released.size()));
        // A put whose reply was lost made the partition: it does not stay, empty.
        if (made_partition) controller_->forget_partition_if_empty(partition_id);
      });
  units_->restarts = &service_.metrics().counter(
      "seqflow_storage_restarts_total",
      "Storage units that registered again with a new instance id (restarted empty); the samples routed "
      "to them were marked not produced");
  register_handlers();
  add_metrics_collector();
}

ControllerService::~ControllerService() { stop(); }

void ControllerService::start() { service_.start(); }
void ControllerService::stop() {
  service_.stop();              // first: no request registers a waiter, no waiter's client is reported gone
  fetch_lease_expiry_.reset();  // then nothing gives samples back to the waiters
  waiters_->stop();
  leases_->stop();
}

std::vector<int64_t> ControllerService::release_and_drop(const std::function<std::vector<int64_t>()>& release,
                                                         const std::string* request) {
  std::unique_lock gate(reuse_gate_);
  if (request != nullptr) check_request_open(*request);
  const auto targets = units_->targets(options_.storage_units, options_.storage_silence_limit);
  std::vector<int64_t> released = release();
  units_->drop(targets, released, *controller_, std::min(options_.storage_timeout, options_.storage_silence_limit));
  return released;
}

void ControllerService::register_handlers() {
  HandlerTable<ControllerService> table(service_, *this);
  // The reuse gate's takers are tried on the I/O thread while no clear holds
  // it, and go to a worker, which waits for it, when one does.
  table.io_then_worker(control::kInsert, &ControllerService::insert);
  table.on_io_thread(control::kMarkProduced, &ControllerService::mark_produced);
  table.io_then_worker(control::kGetMeta, &ControllerService::get_meta);
  table.on_io_thread(control::kSetCustomMeta, &ControllerService::set_custom_meta);
  table.on_worker(control::kClearSamples, &ControllerService::clear_samples);
  table.on_worker(control::kReclaimUnproduced, &ControllerService::reclaim_unproduced);
  table.on_worker(control::kClearPartition, &ControllerService::clear_partition);
  table.on_worker(control::kKvClear, &ControllerService::kv_clear);
  table.on_worker(control::kReplayPass, &ControllerService::replay_pass);
  table.io_then_worker(control::kWatch, &ControllerService::watch);  // answers or waits: never goes to a worker
  table.on_worker(control::kAckReplayPass, &ControllerService::ack_replay_pass);
  table.on_worker(control::kReissueInflightPrompts, &ControllerService::reissue_inflight_prompts);
  table.on_io_thread(control::kForgetPartitionIfEmpty, &ControllerService::forget_partition_if_empty);
  table.on_io_thread(control::kResetConsumption, &ControllerService::reset_consumption);
  table.on_worker(control::kEndLeases, &ControllerService::end_leases);  // a release gives back: may walk long queues
  table.on_io_thread(control::kConsumptionStatus, &ControllerService::consumption_status);
  table.on_io_thread(control::kProductionStatus, &ControllerService::production_status);
  table.on_io_thread(control::kSampleProduction, &ControllerService::sample_production);
  table.on_io_thread(control::kAllConsumed, &ControllerService::all_consumed);
  table.on_io_thread(control::kAllProduced, &ControllerService::all_produced);
  table.on_io_thread(control::kReportTiming, &ControllerService::report_timing);
  table.on_io_thread(control::kTaskWorkload, &ControllerService::task_workload);
  table.on_io_thread(control::kPartitionList, &ControllerService::partition_list);
  table.on_worker(control::kKvResolve, &ControllerService::kv_resolve);
  table.on_io_thread(control::kKvLookup, &ControllerService::kv_lookup);
  table.on_io_thread(control::kKvFind, &ControllerService::kv_find);
  table.on_io_thread(control::kKvKeys, &ControllerService::kv_keys);
  table.on_io_thread(control::kKvList, &ControllerService::kv_list);
  table.on_worker(control::kSave, &ControllerService::save);
  table.on_worker(control::kLoad, &ControllerService::load);
  table.on_worker(control::kSaveStorage, &ControllerService::save_storage);
  table.on_worker(control::kSaveCheckpoint, &ControllerService::save_checkpoint);
  table.on_worker(control::kLoadStorage, &ControllerService::load_storage);
  table.services_only_on_worker(control::kRegisterStorage, &ControllerService::register_storage);
  table.on_io_thread(control::kStorageUnits, &ControllerService::storage_units);
  table.on_io_thread(control::kHello, &ControllerService::hello);
  table.on_io_thread(control::kSetPolicyVersion, &ControllerService::set_policy_version);
  table.on_io_thread(control::kPolicyVersion, &ControllerService::policy_version);
  table.on_io_thread(control::kPolicyVersions, &ControllerService::policy_versions);
}

std::optional<transport::Frames> ControllerService::insert(const transport::Frames& args, bool may_wait) {
  // The budget counts from here: queueing in the service before a worker
  // picks the request up is not counted.
  const auto received = std::chrono::steady_clock::now();
  const control::InsertRequest request = control::decode_insert_request(args);
  const int64_t count = checked_insert_count(request.count, "count");
  std::shared_lock gate(reuse_gate_, std::defer_lock);  // a clear may hold it while it drops released data
  if (!take(gate, may_wait)) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  if (request.budget && now > received + *request.budget) {
    const auto waited = std::chrono::round<std::chrono::milliseconds>(now - received);
    throw Error(ErrorCode::kTimeout, "insert of " + std::to_string(count) + " samples into partition '" +
                                         request.partition_id + "' refused: its client's budget_ms of " +
                                         std::to_string(request.budget->count()) + " ran out after " +
                                         std::to_string(waited.count()) +
                                         " ms behind a clear or load; nothing was inserted");
  }
  bool created = false;
  const BatchMeta inserted = controller_->insert(request.partition_id, count, &created);
  leases_->grant(request.partition_id, inserted.global_indexes, inserted.generations, created,
                 lease_expiry(options_.insert_lease, request.budget, received));
  return control::encode_insert_reply(inserted, created);
}

transport::Frames ControllerService::mark_produced(const transport::Frames& args) {
  const control::MarkProducedRequest request = control::decode_mark_produced_request(args);
  const control::SamplesRequest& samples = request.samples;
  const CommittedWrite committed =
      controller_->mark_produced(samples.partition_id, samples.indexes, samples.generations, request.fields,
                                 request.custom_meta, request.write_version);
  leases_->settle(samples.partition_id, samples.indexes);
  return control::encode_mark_produced_reply(committed);
}

// On the I/O thread: a fetch with enough ready, a poll, an insert while no
// clear holds the reuse gate. A fetch that must wait becomes a waiter
// (DeferredWaiters), holding no thread; an insert behind a clear goes to a
// worker, which waits for the gate. A reply that reaches nobody gives its
// samples back.
std::optional<transport::Frames> ControllerService::get_meta(const transport::Frames& args, bool may_wait) {
  const MetaRequest request = control::decode_get_meta_request(args);
  std::optional<BatchMeta> meta;
  bool returnable = false;
  if (request.mode == MetaMode::kInsert) {
    checked_insert_count(request.batch_size, "batch_size");
    std::shared_lock gate(reuse_gate_, std::defer_lock);
    if (!take(gate, may_wait)) return std::nullopt;
    meta = controller_->try_get_meta(request);
  } else {
    meta = controller_->try_get_meta(request, &returnable);
    if (!meta) {
      const auto deadline =
          wait_deadline(request.timeout,
                        "get_meta not run: its client's deadline passed before it could start; nothing was consumed");
      const zmq::message_t& encoded = args.at(0);
      waiters_->wait(request.partition_id, fetch_wait(*controller_, request),
                     std::string(static_cast<const char*>(encoded.data()), encoded.size()), deadline);
      return std::nullopt;
    }
  }
  if (request.lease.count() != 0 && meta->size() != 0) fetch_lease_expiry_->poke();
  on_undelivered(giving_back(*controller_, request, *meta, returnable));
  return control::encode_batch_reply(*meta);
}

// On the I/O thread: answered at once when there are changes (or a resync,
// or nothing to wait for), else a waiter (DeferredWaiters) holding no thread.
std::optional<transport::Frames> ControllerService::watch(const transport::Frames& args, bool /*may_wait*/) {
  WatchRequest request = control::decode_watch_request(args);
  core::check_watch_request(request);
  const std::chrono::milliseconds wait = request.wait;
  request.wait = std::chrono::milliseconds(0);
  const WatchBatch batch = controller_->watch(request);
  if (!batch.changes.empty() || batch.resync || request.cursor == 0 || wait.count() == 0) {
    return control::encode_watch_reply(batch);
  }
  request.cursor = batch.cursor;
  const auto deadline = wait_deadline(wait, "watch not run: its client's deadline passed before it could start");
  const transport::Frames identity = control::encode_watch_request(request);
  const zmq::message_t& encoded = identity.at(0);
  waiters_->wait(request.partition_id, watch_wait(*controller_, request),
                 std::string(static_cast<const char*>(encoded.data()), encoded.size()), deadline);
  return std::nullopt;
}

transport::Frames ControllerService::set_custom_meta(const transport::Frames& args) {
  const control::SetCustomMetaRequest request = control::decode_set_custom_meta_request(args);
  controller_->set_custom_meta(request.samples.partition_id, request.samples.indexes, request.samples.generations,
                               request.custom_meta);
  return control::encode_empty_reply();
}

transport::Frames ControllerService::released_reply(const std::string& what,
                                                    const std::function<std::vector<int64_t>()>& release) {
  return control::encode_released_reply(release_and_drop(release, &what));
}

transport::Frames ControllerService::clear_samples(transport::Frames& args) {
  const control::SamplesRequest request = control::decode_samples_request(args, control::kClearSamples);
  return released_reply(std::string(control::kClearSamples) + " of partition '" + request.partition_id + "'", [&] {
    return controller_->clear_samples(request.partition_id, request.indexes, request.generations);
  });
}

transport::Frames ControllerService::reclaim_unproduced(transport::Frames& args) {
  const control::SamplesRequest request = control::decode_samples_request(args, control::kReclaimUnproduced);
  return released_reply(std::string(control::kReclaimUnproduced) + " of partition '" + request.partition_id + "'", [&] {
    return controller_->reclaim_unproduced(request.partition_id, request.indexes, request.generations);
  });
}

transport::Frames ControllerService::clear_partition(transport::Frames& args) {
  const std::string partition_id = control::decode_partition_request(args, control::kClearPartition);
  return released_reply(std::string(control::kClearPartition) + " of '" + partition_id + "'",
                        [&] { return controller_->clear_partition(partition_id); });
}

transport::Frames ControllerService::kv_clear(transport::Frames& args) {
  const control::KeysRequest request = control::decode_keys_request(args, control::kKvClear);
  return released_reply(std::string(control::kKvClear) + " in partition '" + request.partition_id + "'",
                        [&] { return controller_->kv_clear(request.partition_id, request.keys); });
}

transport::Frames ControllerService::replay_pass(transport::Frames& args) {
  ReplayRequest request = control::decode_replay_pass_request(args);
  // The pass releases under the reuse gate, which holds inserts: it never
  // waits there (RemoteControlPlane waits between idle passes instead).
  request.wait_ms = 0;
  // A count releases nothing: it needs no gate.
  if (request.step == ReplayStep::kCount) return control::encode_replay_pass_reply(controller_->replay_pass(request));
  const std::string what = std::string(control::kReplayPass) + " in partition '" + request.partition_id + "'";
  ReplayPass pass;
  pass.released = release_and_drop(
      [&] {
        pass = controller_->replay_pass(request);
        return pass.released;
      },
      &what);
  if (pass.kept) fetch_lease_expiry_->poke();  // its lease's end is told to watchers in time
  return control::encode_replay_pass_reply(pass);
}

transport::Frames ControllerService::ack_replay_pass(transport::Frames& args) {
  const control::AckReplayPassRequest request = control::decode_ack_replay_pass_request(args);
  const std::string what = std::string(control::kAckReplayPass) + " in partition '" + request.partition_id + "'";
  ReplayAck ack;
  ack.released = release_and_drop(
      [&] {
        ack = controller_->ack_replay_pass(request.partition_id, request.pass_id);
        return ack.released;
      },
      &what);
  return control::encode_ack_replay_pass_reply(ack);
}

transport::Frames ControllerService::reissue_inflight_prompts(transport::Frames& args) {
  const control::ReissueRequest request = control::decode_reissue_request(args);
  const std::string what =
      std::string(control::kReissueInflightPrompts) + " in partition '" + request.partition_id + "'";
  ReissuedPrompts reissued;
  reissued.released = release_and_drop(
      [&] {
        reissued =
            controller_->reissue_inflight_prompts(request.partition_id, request.global_steps, request.member_status);
        return reissued.released;
      },
      &what);
  return control::encode_reissue_reply(reissued);
}

transport::Frames ControllerService::forget_partition_if_empty(const transport::Frames& args) {
  const std::string partition_id = control::decode_partition_request(args, control::kForgetPartitionIfEmpty);
  return control::encode_flag_reply(control::kForgetPartitionIfEmpty,
                                    controller_->forget_partition_if_empty(partition_id));
}

transport::Frames ControllerService::end_leases(transport::Frames& args) {
  const control::EndLeasesRequest request = control::decode_end_leases_request(args);
  const control::SamplesRequest& samples = request.samples;
  return control::encode_end_leases_reply(controller_->end_leases(
      samples.partition_id, request.task_name, samples.indexes, samples.generations, request.release, request.lease));
}

transport::Frames ControllerService::reset_consumption(const transport::Frames& args) {
  const control::ResetConsumptionRequest request = control::decode_reset_consumption_request(args);
  controller_->reset_consumption(request.partition_id, request.task_name ? &*request.task_name : nullptr);
  return control::encode_empty_reply();
}

transport::Frames ControllerService::consumption_status(const transport::Frames& args) {
  const control::TaskRequest request = control::decode_task_request(args, control::kConsumptionStatus);
  return control::encode_consumption_status_reply(
      controller_->consumption_status(request.task_name, request.partition_id));
}

transport::Frames ControllerService::production_status(const transport::Frames& args) {
  const control::FieldsRequest request = control::decode_fields_request(args, control::kProductionStatus);
  return control::encode_production_status_reply(controller_->production_status(request.fields, request.partition_id));
}

transport::Frames ControllerService::sample_production(const transport::Frames& args) {
  const control::SampleProductionRequest request = control::decode_sample_production_request(args);
  SampleProduction production = controller_->sample_production(request.samples.partition_id, request.samples.indexes,
                                                               request.samples.generations, request.fields);
  production.write_tags = units_->write_tags(production.write_version, options_.storage_units);
  return control::encode_sample_production_reply(production);
}

transport::Frames ControllerService::all_consumed(const transport::Frames& args) {
  const control::TaskRequest request = control::decode_task_request(args, control::kAllConsumed);
  return control::encode_flag_reply(control::kAllConsumed,
                                    controller_->all_consumed(request.task_name, request.partition_id));
}

transport::Frames ControllerService::all_produced(const transport::Frames& args) {
  const control::FieldsRequest request = control::decode_fields_request(args, control::kAllProduced);
  return control::encode_flag_reply(control::kAllProduced,
                                    controller_->all_produced(request.fields, request.partition_id));
}

transport::Frames ControllerService::report_timing(const transport::Frames& args) {
  const control::ReportTimingRequest request = control::decode_report_timing_request(args);
  controller_->report_timing(request.task_name, request.records);
  return control::encode_empty_reply();
}

transport::Frames ControllerService::task_workload(const transport::Frames& args) {
  return control::encode_task_workload_reply(controller_->task_workload(control::decode_task_workload_request(args)));
}

transport::Frames ControllerService::partition_list(const transport::Frames& args) {
  control::decode_bare_request(args, control::kPartitionList);
  return control::encode_partition_list_reply(controller_->partition_list());
}

transport::Frames ControllerService::kv_resolve(transport::Frames& args) {
  const control::KvResolveRequest request = control::decode_kv_resolve_request(args);
  std::shared_lock gate(reuse_gate_);
  bool created = false;
  std::vector<uint8_t> made_keys;
  const BatchMeta resolved =
      controller_->kv_resolve(request.partition_id, request.keys, request.tags, &created, &made_keys);
  return control::encode_kv_resolve_reply(resolved, created, made_keys);
}

transport::Frames ControllerService::kv_lookup(const transport::Frames& args) {
  const control::KeysRequest request = control::decode_keys_request(args, control::kKvLookup);
  return control::encode_batch_reply(controller_->kv_lookup(request.partition_id, request.keys));
}

transport::Frames ControllerService::kv_find(const transport::Frames& args) {
  const control::KeysRequest request = control::decode_keys_request(args, control::kKvFind);
  return control::encode_batch_reply(controller_->kv_find(request.partition_id, request.keys));
}

transport::Frames ControllerService::kv_keys(const transport::Frames& args) {
  const control::KvKeysRequest request = control::decode_kv_keys_request(args);
  return control::encode_kv_keys_reply(controller_->kv_keys(request.partition_id, request.global_indexes));
}

transport::Frames ControllerService::set_policy_version(const transport::Frames& args) {
  controller_->set_policy_version(control::decode_policy_version(args, request_name(control::kSetPolicyVersion)));
  return control::encode_empty_reply();
}

transport::Frames ControllerService::policy_version(const transport::Frames& args) {
  control::decode_bare_request(args, control::kPolicyVersion);
  return control::encode_policy_version(controller_->policy_version());
}

transport::Frames ControllerService::policy_versions(const transport::Frames& args) {
  const control::PolicyVersionsRequest request = control::decode_policy_versions_request(args);
  return control::encode_policy_versions_reply(
      request.keys ? controller_->kv_policy_versions(request.partition_id, *request.keys)
                   : controller_->policy_versions(request.partition_id, *request.global_indexes));
}

transport::Frames ControllerService::kv_list(const transport::Frames& args) {
  const control::KvListRequest request = control::decode_kv_list_request(args);
  return control::encode_kv_list_reply(
      controller_->kv_list(request.partition_id ? &*request.partition_id : nullptr, request.known));
}

transport::Frames ControllerService::save(transport::Frames& args) {
  controller_->save(
      checkpoint_root_.resolve(control::decode_path_request(args, control::kSave), request_name(control::kSave)));
  return control::encode_empty_reply();
}

transport::Frames ControllerService::load(transport::Frames& args) {
  const std::string path =
      checkpoint_root_.resolve(control::decode_path_request(args, control::kLoad), request_name(control::kLoad));
  std::unique_lock gate(reuse_gate_);
  check_request_open(std::string(control::kLoad) + " of '" + path + "'");  // it may have waited behind a clear
  controller_->load(path);
  return control::encode_empty_reply();
}

// The storage units' part of a client's checkpoint: the controller asks
// every unit (a unit saves and loads for no one else), each writing or
// reading <path>.unit<u> under its own checkpoint root. A save answers with
// the units' fingerprints, which a load may be given back: a unit then
// refuses a file of another save; check_only asks only that, so that a
// client learns of a mixed checkpoint before any unit loads.
std::vector<uint64_t> ControllerService::save_units(const std::string& path) {
  const auto units = units_->answering(options_.storage_units, options_.storage_silence_limit);
  std::vector<uint64_t> fingerprints;
  for (const auto& reply : Units::call_each(
           units, storage_protocol::kSave,
           [&](size_t u, const std::string&admin_token) {
             return storage_protocol::encode_save_request({storage_unit_file(path, u), admin_token});
           },
           options_.storage_timeout)) {
    fingerprints.push_back(storage_protocol::decode_save_reply(reply));
  }
  return fingerprints;
}

transport::Frames ControllerService::save_storage(transport::Frames& args) {
  return control::encode_fingerprints_reply(save_units(control::decode_path_request(args, control::kSaveStorage)));
}

// A client's whole checkpoint in one cut: no insert, clear or load runs
// while the controller and then every unit save. A sample produced in the
// controller's file had its data put before, and nothing can drop it or
// reuse its index until the units have saved.
transport::Frames ControllerService::save_checkpoint(transport::Frames& args) {
  const control::SaveCheckpointRequest request = control::decode_save_checkpoint_request(args);
  const std::string path = checkpoint_root_.resolve(request.controller, request_name(control::kSaveCheckpoint));
  std::unique_lock gate(reuse_gate_);
  check_request_open(std::string(control::kSaveCheckpoint));
  controller_->save(path);
  return control::encode_fingerprints_reply(save_units(request.storage));
}

transport::Frames ControllerService::load_storage(transport::Frames& args) {
  const control::LoadStorageRequest request = control::decode_load_storage_request(args, options_.storage_units);
  const auto units = units_->answering(options_.storage_units, options_.storage_silence_limit);
  Units::call_each(
      units, storage_protocol::kLoad,
      [&](size_t u, const std::string& admin_token) {
        const auto fingerprint = request.fingerprints.empty() ? std::nullopt : std::optional(request.fingerprints[u]);
        std::vector<std::string> parts;
        for (size_t part = 0; part < units.size(); ++part) parts.push_back(storage_unit_file(request.path, part));
        return storage_protocol::encode_load_request(
            {storage_unit_file(request.path, u), fingerprint, request.check_only, admin_token, u, units.size(), parts});
      },
      options_.storage_timeout);
  return control::encode_empty_reply();
}

transport::Frames ControllerService::register_storage(transport::Frames& args) {
  const control::RegisterStorageRequest request = control::decode_register_storage_request(args);
  if (request.protocol != control::kProtocolVersion) {
    throw Error(
        ErrorCode::kInvalidArgument,
        control::protocol_mismatch("this controller", "the storage unit at " + request.endpoint, request.protocol));
  }
  // A unit that holds (or may hold) data of another incarnation joins only
  // once it has dropped that data and registers again with this one, so no
  // client learns of it before (a unit that sends none predates this).
  if (!request.incarnation || *request.incarnation == controller_->incarnation()) {
    // A unit that sends no instance id: its restarts go unseen.
    units_->heartbeat(request.endpoint, request.instance, request.admin_token, options_, *controller_);
    units_->settle_owed(request.endpoint, options_.storage_timeout);
  }
  control::StorageUnitsReply reply = units_->listing(options_.storage_units);
  reply.incarnation = controller_->incarnation();
  return control::encode_storage_units_reply(reply);
}

transport::Frames ControllerService::hello(const transport::Frames& args) {
  const int64_t protocol = control::decode_hello(args, request_name(control::kHello));
  if (protocol != control::kProtocolVersion) {
    throw Error(ErrorCode::kInvalidArgument, control::protocol_mismatch("this controller", "the client", protocol));
  }
  return control::encode_hello(control::kProtocolVersion);
}

transport::Frames ControllerService::storage_units(const transport::Frames& args) {
  control::decode_bare_request(args, control::kStorageUnits);
  return control::encode_storage_units_reply(units_->listing(options_.storage_units));
}

void ControllerService::add_metrics_collector() {
  std::weak_ptr<Controller> weak = controller_;
  Units* units = units_.get();
  const size_t expected = options_.storage_units;
  service_.metrics().add_collector([weak, units, expected](std::string& out) {
    auto controller = weak.lock();
    if (!controller) return;
    const auto progress = controller->progress();
    out +=
        "# HELP seqflow_partition_samples Live samples per partition\n# TYPE seqflow_partition_samples "
        "gauge\n";
    for (const auto& p : progress) {
      out +=
          "seqflow_partition_samples{partition=\"" + label(p.partition_id) + "\"} " + std::to_string(p.samples) + "\n";
    }
    out +=
        "# HELP seqflow_partition_produced Samples with the field produced\n"
        "# TYPE seqflow_partition_produced gauge\n";
    for (const auto& p : progress) {
      for (const auto& [field, count] : p.produced) {
        out += "seqflow_partition_produced{partition=\"" + label(p.partition_id) + "\",field=\"" + label(field) +
               "\"} " + std::to_string(count) + "\n";
      }
    }
    const auto per_task = [&](const std::string& name, const char* help,
                              std::map<std::string, size_t> PartitionProgress::*counts) {
      out += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
      for (const auto& p : progress) {
        for (const auto& [task, count] : p.*counts) {
          out += name + "{partition=\"" + label(p.partition_id) + "\",task=\"" + label(task) + "\"} " +
                 std::to_string(count) + "\n";
        }
      }
    };
    per_task("seqflow_partition_consumed", "Samples the task consumed", &PartitionProgress::consumed);
    per_task("seqflow_partition_leased", "Consumed samples the task holds under a fetch lease not yet ended",
             &PartitionProgress::leased);
    render_task_workloads(controller->task_workloads(), out);
    out += "# HELP seqflow_policy_version The trainer's current policy version\n# TYPE seqflow_policy_version gauge\n";
    out += "seqflow_policy_version " + std::to_string(controller->policy_version()) + "\n";
    std::lock_guard lock(units->mutex);
    out +=
        "# HELP seqflow_storage_units Storage units registered, and expected\n"
        "# TYPE seqflow_storage_units gauge\n";
    out += "seqflow_storage_units{state=\"registered\"} " + std::to_string(units->endpoints.size()) + "\n";
    out += "seqflow_storage_units{state=\"expected\"} " + std::to_string(expected) + "\n";
  });
}

}  // namespace seqflow::server
