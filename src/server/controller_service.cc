#include "server/controller_service.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "durable/checkpoint_directory.h"
#include "transport/connection.h"
#include "transport/storage_routing.h"
#include "transport/timing_codec.h"
#include "transport/wire_codec.h"
#include "transport/write_tag.h"
#include "seqflow/error.h"
#include "server/owed_drops.h"
#include "server/workload_metrics.h"

namespace seqflow::server {
namespace {

using transport::storage_unit_file;
using transport::wire::Header;
using transport::wire::Json;

// kMaxInsertPerRequest, checked before the controller allocates anything.
int64_t checked_insert_count(int64_t count, const char* parameter) {
  if (count > kMaxInsertPerRequest) {
    throw_invalid(std::string(parameter) + " " + std::to_string(count) + " exceeds the limit of " +
                  std::to_string(kMaxInsertPerRequest) + " samples per insert request; insert in batches");
  }
  return count;
}

// The deadline of an insert request, from its "budget_ms" field (absent:
// none, as from clients that predate it).
std::optional<std::chrono::steady_clock::time_point> insert_deadline(const Header& header,
                                                                     std::chrono::steady_clock::time_point received) {
  if (!header.has("budget_ms")) return std::nullopt;
  const int64_t budget = header.integer("budget_ms");
  if (budget < 1 || budget > kMaxInsertBudget.count()) {
    header.fail("budget_ms", "must be between 1 and " + std::to_string(kMaxInsertBudget.count()) + " ms, got " +
                                 std::to_string(budget));
  }
  return received + std::chrono::milliseconds(budget);
}

// When an insert's samples, unproduced by then, are reclaimed: see
// ControllerServiceOptions::insert_lease.
std::chrono::steady_clock::time_point lease_expiry(std::chrono::milliseconds insert_lease, const Header& header,
                                                   std::chrono::steady_clock::time_point received) {
  if (insert_lease.count() > 0) return received + insert_lease;
  if (!header.has("budget_ms")) return received + kDefaultInsertLease;
  return received + std::chrono::milliseconds(header.integer("budget_ms")) + kInsertLeaseGrace;
}

// A blocking fetch waits no longer than its client does, less a margin for
// the reply's way back: a batch handed out after the client gave up would be
// consumed and received by nobody. kTimeout when no time is left.
std::chrono::steady_clock::time_point wait_deadline(const MetaRequest& request) {
  constexpr auto kLongestWait = std::chrono::hours(24 * 365);
  const auto now = std::chrono::steady_clock::now();
  auto deadline = now + std::min<std::chrono::milliseconds>(request.timeout, kLongestWait);
  const auto client_deadline = request_deadline();
  if (!client_deadline) return deadline;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*client_deadline - now);
  const auto margin = std::min(left / 10, std::chrono::milliseconds(500));
  if (left - margin <= std::chrono::milliseconds(0)) {
    throw Error(ErrorCode::kTimeout,
                "get_meta not run: its client's deadline passed before it could start; nothing "
                "was consumed");
  }
  return std::min(deadline, now + (left - margin));
}

// Takes the reuse gate, waiting for it or (may_wait false) only if free now.
bool take(std::shared_lock<std::shared_mutex>& gate, bool may_wait) {
  if (!may_wait) return gate.try_lock();
  gate.lock();
  return true;
}

// A request's "generations" (absent: not known, a BatchMeta built by hand).
std::vector<uint64_t> generations_of(const Header& header) {
  return header.has("generations") ? header.numbers<uint64_t>("generations") : std::vector<uint64_t>{};
}

// [the batch, {"created": bool}]: whether the call made its partition, so
// that a client whose put fails removes only a partition it made.
transport::Frames with_created(const BatchMeta& meta, bool created) {
  transport::Frames reply;
  reply.push_back(transport::wire::batch_meta_frame(meta));
  reply.push_back(transport::wire::header_frame(Json{{"created", created}}));
  return reply;
}

Json released_reply(const std::vector<int64_t>& released) {
  return Json{{"released", transport::wire::binary_of(std::span<const int64_t>(released))}};
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
  std::vector<std::string> endpoints;  // sorted: the unit of gi is endpoints[gi % N]
  std::map<std::string, std::shared_ptr<transport::ConnectionPool>> pools;
  std::map<std::string, Clock::time_point> last_seen;
  // The instance id each unit last registered with (units that send one).
  std::map<std::string, int64_t> instances;
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

  Json listing(size_t expected) {
    std::lock_guard lock(mutex);
    return Json{{"units", endpoints}, {"expected", expected}};
  }

  // A unit's registration (every heartbeat): the first one joins it, up to
  // the expected count. A unit that comes back with another instance id
  // restarted empty: every sample routed to it (gi % N, N units in endpoint
  // order) lost its data, so the controller forgets their production until
  // they are put again. Under the units' lock (then the controller's; nothing
  // takes them the other way round), so that joins and restarts are seen in
  // one order; not under the reuse gate, which a clear may hold for long.
  void heartbeat(const std::string& endpoint, std::optional<int64_t> instance, const std::string& admin_token,
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
    // Before every unit has registered, gi % N has no unit yet.
    if (restarted.empty() || endpoints.size() != expected) return;
    const auto units = static_cast<int64_t>(expected);
    for (const std::string& unit : restarted) {
      const auto place =
          static_cast<int64_t>(std::lower_bound(endpoints.begin(), endpoints.end(), unit) - endpoints.begin());
      controller.forget_production(nullptr, [place, units](int64_t gi) { return gi % units == place; });
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

  // Sends each unit its request (admin token added) at once, then takes
  // every reply in routing order; the first failure is rethrown once all
  // are in. For the controller's own ops: saves and loads.
  static std::vector<transport::Frames> call_each(const std::vector<Target>& units, std::string_view op,
                                                  const std::function<Json(size_t unit)>& request,
                                                  std::chrono::milliseconds timeout) {
    std::vector<transport::ConnectionPool::Lease> leases;
    std::vector<uint64_t> ids;
    const auto deadline = transport::Connection::Clock::now() + timeout;
    for (size_t u = 0; u < units.size(); ++u) {
      Json json = request(u);
      json["admin_token"] = units[u].admin_token;
      leases.push_back(units[u].pool->acquire());
      ids.push_back(leases.back()->send(op, transport::wire::header_message(json), deadline));
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
        targets[u].pool->call("clear", clear_request(indexes, unit_generations, targets[u].admin_token), timeout);
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
    std::optional<int64_t> instance;
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
      pool->call("clear", clear_request(debt.indexes, debt.generations, admin_token), timeout);
    } catch (const Error&) {
      std::lock_guard lock(mutex);
      const auto known = instances.find(endpoint);
      const std::optional<int64_t> now = known != instances.end() ? std::optional(known->second) : std::nullopt;
      if (now != instance) return;  // restarted: its data went with it
      owed.add(endpoint, debt.indexes, debt.generations);
      owed_drops->set(static_cast<double>(owed.size()));
    }
  }

  static transport::Frames clear_request(std::span<const int64_t> indexes, std::span<const uint64_t> generations,
                                         const std::string& admin_token) {
    return transport::wire::header_message(Json{{"indexes", transport::wire::binary_of(indexes)},
                                                {"generations", transport::wire::binary_of(generations)},
                                                {"admin_token", admin_token}});
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
  waiters_ = std::make_unique<FetchWaiters>(*controller_);
  Counter& reclaimed = service_.metrics().counter(
      "seqflow_insert_samples_reclaimed_total",
      "Samples a put inserted and never marked produced within its lease (its producer died mid-put): removed");
  leases_ = std::make_unique<InsertLeases>([this, &reclaimed](
                                               const std::string& partition_id, const std::vector<int64_t>& indexes,
                                               const std::vector<uint64_t>& generations, bool made_partition) {
    std::unique_lock gate(reuse_gate_);
    const auto targets = units_->targets(options_.storage_units, options_.storage_silence_limit);
    const auto released = controller_->reclaim_unproduced(partition_id, indexes, generations);
    if (released.empty()) return;
    units_->drop(targets, released, *controller_, std::min(options_.storage_timeout, options_.storage_silence_limit));
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
  service_.stop();  // first: no request registers a waiter, no waiter's client is reported gone
  waiters_->stop();
  leases_->stop();
}

void ControllerService::register_handlers() {
  Controller& controller = *controller_;
  // Requests that take the reuse gate are answered on the I/O thread when
  // it is free (`may_wait` false; nullopt otherwise) and by a worker, which
  // waits for it, when a clear holds it.
  const auto insert = [this, &controller](const transport::Frames& args,
                                          bool may_wait) -> std::optional<transport::Frames> {
    // The budget counts from here: queueing in the service before a worker
    // picks the request up is not counted.
    const auto received = std::chrono::steady_clock::now();
    const Json json = transport::wire::read_header(args, 0, "insert request");
    const Header header(json, "insert request", {"partition_id", "count", "budget_ms"});
    const std::string partition_id = header.text("partition_id");
    const int64_t count = checked_insert_count(header.integer("count"), "count");
    const auto deadline = insert_deadline(header, received);
    std::shared_lock gate(reuse_gate_, std::defer_lock);  // a clear may hold it while it drops released data
    if (!take(gate, may_wait)) return std::nullopt;
    const auto now = std::chrono::steady_clock::now();
    if (deadline && now > *deadline) {
      const auto waited = std::chrono::round<std::chrono::milliseconds>(now - received);
      throw Error(ErrorCode::kTimeout, "insert of " + std::to_string(count) + " samples into partition '" +
                                           partition_id + "' refused: its client's budget_ms of " +
                                           std::to_string(header.integer("budget_ms")) + " ran out after " +
                                           std::to_string(waited.count()) +
                                           " ms behind a clear or load; nothing was inserted");
    }
    bool created = false;
    const BatchMeta inserted = controller.insert(partition_id, count, &created);
    leases_->grant(partition_id, inserted.global_indexes, inserted.generations, created,
                   lease_expiry(options_.insert_lease, header, received));
    return with_created(inserted, created);
  };
  service_.handle(
      "insert", [insert](transport::Frames& args) { return *insert(args, true); },
      [insert](const transport::Frames& args) { return insert(args, false); });
  service_.handle("mark_produced", nullptr, [this, &controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "mark_produced request");
    const Header header(json, "mark_produced request",
                        {"partition_id", "indexes", "generations", "fields", "custom_meta", "write_version"});
    const auto indexes = header.numbers<int64_t>("indexes");
    const auto fields = transport::wire::decode_schemas(header.at("fields"), "mark_produced request");
    const auto custom_meta = header.objects("custom_meta");
    const int64_t write_version = header.has("write_version") ? header.integer("write_version") : 0;
    if (write_version < 0) header.fail("write_version", "must not be negative");
    const CommittedWrite committed =
        controller.mark_produced(header.text("partition_id"), indexes, generations_of(header), fields, custom_meta,
                                 static_cast<uint64_t>(write_version));
    leases_->settle(header.text("partition_id"), indexes);
    return transport::wire::header_message(transport::wire::encode_committed_write(committed));
  });
  // On the I/O thread: a fetch with enough ready, a poll, an insert while
  // no clear holds the reuse gate. A fetch that must wait becomes a waiter
  // (FetchWaiters), holding no thread; an insert behind a clear goes to a
  // worker, which waits for the gate. A reply that reaches nobody gives its
  // samples back.
  const auto get_meta = [this, &controller](const transport::Frames& args,
                                            bool may_wait) -> std::optional<transport::Frames> {
    const MetaRequest request = transport::wire::read_meta_request(args, 0, "get_meta request");
    std::optional<BatchMeta> meta;
    bool returnable = false;
    if (request.mode == MetaMode::kInsert) {
      checked_insert_count(request.batch_size, "batch_size");
      std::shared_lock gate(reuse_gate_, std::defer_lock);
      if (!take(gate, may_wait)) return std::nullopt;
      meta = controller.try_get_meta(request);
    } else {
      meta = controller.try_get_meta(request, &returnable);
      if (!meta) {
        const auto deadline = wait_deadline(request);
        const zmq::message_t& encoded = args.at(0);
        waiters_->wait(request, std::string(static_cast<const char*>(encoded.data()), encoded.size()), deadline);
        return std::nullopt;
      }
    }
    on_undelivered(giving_back(controller, request, *meta, returnable));
    return transport::wire::header_message(transport::wire::batch_meta_frame(*meta));
  };
  service_.handle(
      "get_meta", [get_meta](transport::Frames& args) { return *get_meta(args, true); },
      [get_meta](const transport::Frames& args) { return get_meta(args, false); });
  service_.handle("set_custom_meta", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "set_custom_meta request");
    const Header header(json, "set_custom_meta request", {"partition_id", "indexes", "generations", "custom_meta"});
    controller.set_custom_meta(header.text("partition_id"), header.numbers<int64_t>("indexes"), generations_of(header),
                               header.objects("custom_meta"));
    return transport::wire::header_message(Json::object());
  });
  // A clear releases samples under the reuse gate (after which it may have
  // waited behind another clear, so its request may have closed) and drops
  // their data on the units.
  const auto release_and_drop = [this](const std::string& what, const auto& release) {
    std::unique_lock gate(reuse_gate_);
    check_request_open(what);
    const auto targets = units_->targets(options_.storage_units, options_.storage_silence_limit);
    const std::vector<int64_t> released = release();
    units_->drop(targets, released, *controller_, std::min(options_.storage_timeout, options_.storage_silence_limit));
    return transport::wire::header_message(released_reply(released));
  };
  // clear_samples and reclaim_unproduced: samples named by index and generation.
  const auto handle_samples_release = [this, release_and_drop](const std::string& op, const auto& release) {
    service_.handle(op, [op, release_and_drop, release](transport::Frames& args) {
      const Json json = transport::wire::read_header(args, 0, op + " request");
      const Header header(json, op + " request", {"partition_id", "indexes", "generations"});
      return release_and_drop(op + " of partition '" + header.text("partition_id") + "'", [&] {
        return release(header.text("partition_id"), header.numbers<int64_t>("indexes"), generations_of(header));
      });
    });
  };
  handle_samples_release("clear_samples",
                         [&controller](const std::string& partition_id, const std::vector<int64_t>& indexes,
                                       const std::vector<uint64_t>& generations) {
                           return controller.clear_samples(partition_id, indexes, generations);
                         });
  handle_samples_release("reclaim_unproduced",
                         [&controller](const std::string& partition_id, const std::vector<int64_t>& indexes,
                                       const std::vector<uint64_t>& generations) {
                           return controller.reclaim_unproduced(partition_id, indexes, generations);
                         });
  service_.handle("clear_partition", [&controller, release_and_drop](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "clear_partition request");
    const Header header(json, "clear_partition request", {"partition_id"});
    return release_and_drop("clear_partition of '" + header.text("partition_id") + "'",
                            [&] { return controller.clear_partition(header.text("partition_id")); });
  });
  service_.handle("kv_clear", [&controller, release_and_drop](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "kv_clear request");
    const Header header(json, "kv_clear request", {"partition_id", "keys"});
    return release_and_drop("kv_clear in partition '" + header.text("partition_id") + "'",
                            [&] { return controller.kv_clear(header.text("partition_id"), header.texts("keys")); });
  });
  service_.handle("forget_partition_if_empty", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "forget_partition_if_empty request");
    const Header header(json, "forget_partition_if_empty request", {"partition_id"});
    return transport::wire::header_message(
        Json{{"forgotten", controller.forget_partition_if_empty(header.text("partition_id"))}});
  });
  service_.handle("reset_consumption", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "reset_consumption request");
    const Header header(json, "reset_consumption request", {"partition_id", "task_name"});
    const std::string task = header.has("task_name") ? header.text("task_name") : std::string();
    controller.reset_consumption(header.text("partition_id"), header.has("task_name") ? &task : nullptr);
    return transport::wire::header_message(Json::object());
  });
  // Status replies of a partition that does not exist hold no "status".
  service_.handle("consumption_status", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "consumption_status request");
    const Header header(json, "consumption_status request", {"task_name", "partition_id"});
    const auto status = controller.consumption_status(header.text("task_name"), header.text("partition_id"));
    return transport::wire::header_message(status ? Json{{"status", transport::wire::encode_status(*status)}}
                                                  : Json::object());
  });
  service_.handle("production_status", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "production_status request");
    const Header header(json, "production_status request", {"fields", "partition_id"});
    const auto status = controller.production_status(header.texts("fields"), header.text("partition_id"));
    if (!status) return transport::wire::header_message(Json::object());
    return transport::wire::header_message(
        Json{{"status",
              {{"indexes", transport::wire::binary_of(std::span<const int64_t>(status->global_indexes))},
               {"produced", transport::wire::binary_of(std::span<const uint8_t>(status->produced))}}}});
  });
  service_.handle("sample_production", nullptr, [this, &controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "sample_production request");
    const Header header(json, "sample_production request", {"partition_id", "indexes", "generations", "fields"});
    const SampleProduction production =
        controller.sample_production(header.text("partition_id"), header.numbers<int64_t>("indexes"),
                                     generations_of(header), header.texts("fields"));
    const std::vector<uint64_t> tags = units_->write_tags(production.write_version, options_.storage_units);
    return transport::wire::header_message(
        Json{{"exists", transport::wire::binary_of(std::span<const uint8_t>(production.exists))},
             {"generations", transport::wire::binary_of(std::span<const uint64_t>(production.generations))},
             {"produced", transport::wire::binary_of(std::span<const uint8_t>(production.produced))},
             {"write_version", production.write_version},
             {"write_tags", transport::wire::binary_of(std::span<const uint64_t>(tags))}});
  });
  service_.handle("all_consumed", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "all_consumed request");
    const Header header(json, "all_consumed request", {"task_name", "partition_id"});
    return transport::wire::header_message(
        Json{{"value", controller.all_consumed(header.text("task_name"), header.text("partition_id"))}});
  });
  service_.handle("all_produced", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "all_produced request");
    const Header header(json, "all_produced request", {"fields", "partition_id"});
    return transport::wire::header_message(
        Json{{"value", controller.all_produced(header.texts("fields"), header.text("partition_id"))}});
  });
  service_.handle("report_timing", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "report_timing request");
    const Header header(json, "report_timing request", {"task_name", "lengths", "counts", "seconds"});
    controller.report_timing(header.text("task_name"), transport::wire::read_timing_records(header));
    return transport::wire::header_message(Json::object());
  });
  service_.handle("task_workload", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "task_workload request");
    const Header header(json, "task_workload request", {"task_name"});
    return transport::wire::header_message(
        transport::wire::task_workload_reply(controller.task_workload(header.text("task_name"))));
  });
  service_.handle("partition_list", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "partition_list request");
    const Header header(json, "partition_list request", {});
    return transport::wire::header_message(Json{{"partitions", controller.partition_list()}});
  });
  service_.handle("kv_resolve", [this, &controller](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "kv_resolve request");
    const Header header(json, "kv_resolve request", {"partition_id", "keys", "tags"});
    std::shared_lock gate(reuse_gate_);
    bool created = false;
    std::vector<uint8_t> made_keys;
    const BatchMeta resolved = controller.kv_resolve(header.text("partition_id"), header.texts("keys"),
                                                     header.objects("tags"), &created, &made_keys);
    transport::Frames reply = with_created(resolved, created);
    reply[1] = transport::wire::header_frame(
        Json{{"created", created}, {"made_keys", transport::wire::binary_of(std::span<const uint8_t>(made_keys))}});
    return reply;
  });
  service_.handle("kv_lookup", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "kv_lookup request");
    const Header header(json, "kv_lookup request", {"partition_id", "keys"});
    return transport::wire::header_message(
        transport::wire::batch_meta_frame(controller.kv_lookup(header.text("partition_id"), header.texts("keys"))));
  });
  service_.handle("kv_find", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "kv_find request");
    const Header header(json, "kv_find request", {"partition_id", "keys"});
    return transport::wire::header_message(
        transport::wire::batch_meta_frame(controller.kv_find(header.text("partition_id"), header.texts("keys"))));
  });
  service_.handle("kv_keys", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "kv_keys request");
    const Header header(json, "kv_keys request", {"partition_id", "global_indexes"});
    return transport::wire::header_message(
        Json{{"keys", controller.kv_keys(header.text("partition_id"), header.numbers<int64_t>("global_indexes"))}});
  });
  service_.handle("kv_list", nullptr, [&controller](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "kv_list request");
    const Header header(json, "kv_list request", {"partition_id", "known_partitions", "known_versions"});
    const std::string partition = header.has("partition_id") ? header.text("partition_id") : std::string();
    return transport::wire::header_message(transport::wire::kv_list_frame(controller.kv_list(
        header.has("partition_id") ? &partition : nullptr, transport::wire::read_known_listings(header))));
  });
  service_.handle("save", [this, &controller](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "save request");
    controller.save(checkpoint_root_.resolve(Header(json, "save request", {"path"}).text("path"), "save request"));
    return transport::wire::header_message(Json::object());
  });
  service_.handle("load", [this, &controller](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "load request");
    const std::string path =
        checkpoint_root_.resolve(Header(json, "load request", {"path"}).text("path"), "load request");
    std::unique_lock gate(reuse_gate_);
    check_request_open("load of '" + path + "'");  // it may have waited behind a clear
    controller.load(path);
    return transport::wire::header_message(Json::object());
  });
  // The storage units' part of a client's checkpoint: the controller asks
  // every unit (a unit saves and loads for no one else), each writing or
  // reading <path>.unit<u> under its own checkpoint root. A save answers
  // with the units' fingerprints, which a load may be given back: a unit
  // then refuses a file of another save; check_only asks only that, so that
  // a client learns of a mixed checkpoint before any unit loads.
  // Has every unit write its part of the storage checkpoint at `path`;
  // their fingerprints, in routing order.
  const auto save_units = [this](const std::string& path) {
    const auto units = units_->answering(options_.storage_units, options_.storage_silence_limit);
    Json fingerprints = Json::array();
    for (const auto& reply : Units::call_each(
             units, "save",
             [&](size_t u) {
               return Json{{"path", storage_unit_file(path, u)}};
             },
             options_.storage_timeout)) {
      const Json header = transport::wire::read_header(reply, 0, "save reply");
      fingerprints.push_back(Header(header, "save reply", {"fingerprint"}).at("fingerprint"));
    }
    return Json{{"fingerprints", std::move(fingerprints)}};
  };
  service_.handle("save_storage", [save_units](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "save_storage request");
    return transport::wire::header_message(save_units(Header(json, "save_storage request", {"path"}).text("path")));
  });
  // A client's whole checkpoint in one cut: no insert, clear or load runs
  // while the controller and then every unit save. A sample produced in the
  // controller's file had its data put before, and nothing can drop it or
  // reuse its index until the units have saved.
  service_.handle("save_checkpoint", [this, &controller, save_units](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "save_checkpoint request");
    const Header header(json, "save_checkpoint request", {"controller", "storage"});
    const std::string path = checkpoint_root_.resolve(header.text("controller"), "save_checkpoint request");
    std::unique_lock gate(reuse_gate_);
    check_request_open("save_checkpoint");
    controller.save(path);
    return transport::wire::header_message(save_units(header.text("storage")));
  });
  service_.handle("load_storage", [this](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "load_storage request");
    const Header header(json, "load_storage request", {"path", "fingerprints", "check_only"});
    const std::string path = header.text("path");
    const auto units = units_->answering(options_.storage_units, options_.storage_silence_limit);
    const Json fingerprints = header.has("fingerprints") ? header.at("fingerprints") : Json::array();
    if (!fingerprints.is_array() || (!fingerprints.empty() && fingerprints.size() != units.size())) {
      header.fail("fingerprints", "must hold one fingerprint per storage unit (" + std::to_string(units.size()) + ")");
    }
    const bool check_only = header.has("check_only") && header.boolean("check_only");
    Units::call_each(
        units, "load",
        [&](size_t u) {
          Json request{{"path", storage_unit_file(path, u)}};
          if (!fingerprints.empty()) request["fingerprint"] = fingerprints[u];
          if (check_only) request["check_only"] = true;
          return request;
        },
        options_.storage_timeout);
    return transport::wire::header_message(Json::object());
  });
  service_.handle_services_only("register_storage", [this, &controller](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "register_storage request");
    const Header header(json, "register_storage request", {"endpoint", "instance", "incarnation", "admin_token"});
    const std::string endpoint = header.text("endpoint");
    const std::string admin_token = header.text("admin_token");
    if (endpoint.empty()) throw_invalid("register_storage request field 'endpoint' is empty");
    // A unit that sends no instance id: its restarts go unseen.
    const auto instance = header.has("instance") ? std::optional(header.integer("instance")) : std::nullopt;
    // As int64: the wire's integers are signed.
    const auto incarnation = std::bit_cast<int64_t>(controller.incarnation());
    // A unit that holds (or may hold) data of another incarnation joins only
    // once it has dropped that data and registers again with this one, so
    // no client learns of it before (a unit that sends none predates this).
    const bool joins = !header.has("incarnation") || header.integer("incarnation") == incarnation;
    if (joins) {
      units_->heartbeat(endpoint, instance, admin_token, options_, controller);
      units_->settle_owed(endpoint, options_.storage_timeout);
    }
    Json reply = units_->listing(options_.storage_units);
    reply["incarnation"] = incarnation;
    return transport::wire::header_message(reply);
  });
  service_.handle("storage_units", nullptr, [this](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "storage_units request");
    const Header header(json, "storage_units request", {});
    return transport::wire::header_message(units_->listing(options_.storage_units));
  });
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
    out +=
        "# HELP seqflow_partition_consumed Samples the task consumed\n"
        "# TYPE seqflow_partition_consumed gauge\n";
    for (const auto& p : progress) {
      for (const auto& [task, count] : p.consumed) {
        out += "seqflow_partition_consumed{partition=\"" + label(p.partition_id) + "\",task=\"" + label(task) + "\"} " +
               std::to_string(count) + "\n";
      }
    }
    render_task_workloads(controller->task_workloads(), out);
    std::lock_guard lock(units->mutex);
    out +=
        "# HELP seqflow_storage_units Storage units registered, and expected\n"
        "# TYPE seqflow_storage_units gauge\n";
    out += "seqflow_storage_units{state=\"registered\"} " + std::to_string(units->endpoints.size()) + "\n";
    out += "seqflow_storage_units{state=\"expected\"} " + std::to_string(expected) + "\n";
  });
}

}  // namespace seqflow::server
