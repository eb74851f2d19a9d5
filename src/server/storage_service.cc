#include "server/storage_service.h"

#include <bit>
#include <iterator>

#include "common/constant_time.h"
#include "common/random_id.h"
#include "transport/connection.h"
#include "transport/control_protocol.h"
#include "transport/local_copy.h"
#include "transport/local_copy_session.h"
#include "transport/storage_protocol.h"
#include "transport/storage_routing.h"
#include "transport/wire_codec.h"
#include "transport/write_tag.h"
#include "seqflow/error.h"
#include "durable/framed_file.h"
#include "storage/checkpoint.h"
#include "server/handler_table.h"
#include "server/storage_capacity_metrics.h"

namespace seqflow::server {
namespace {

namespace storage_protocol = transport::storage_protocol;
using transport::wire::request_name;

}  // namespace

void StorageService::check_write_tag(std::optional<uint64_t> write_tag, std::string_view op, uint64_t version) const {
  if (version == 0) return;  // refused by the storage itself, naming write_version
  if (write_tag != transport::write_tag(admin_token_, version)) {
    throw Error(ErrorCode::kPermissionDenied, std::string(op) + " of write_version " + std::to_string(version) +
                                                  " refused: it needs the write_tag its controller handed out");
  }
}

void StorageService::check_controller(const std::optional<std::string>& admin_token, std::string_view what) const {
  if (!admin_token || !equal_in_constant_time(*admin_token, admin_token_)) {
    throw Error(ErrorCode::kPermissionDenied, std::string(what) +
                                                  " refused: only the controller this unit registered with may "
                                                  "clear, save or load it");
  }
}

StorageService::StorageService(StorageServiceOptions options)
    : options_(std::move(options)),
      checkpoint_root_(options_.checkpoint_root),
      instance_id_(random_u64()),
      admin_token_(random_hex_token<16>()),
      storage_(std::make_shared<StorageUnit>(options_.storage)),
      leases_(options_.lease_lifetime),
      sessions_(std::make_unique<transport::local_copy::SessionListener>()),
      service_(options_.service) {
  if (options_.heartbeat.count() <= 0) {
    throw_invalid("heartbeat must be positive, got " + std::to_string(options_.heartbeat.count()) + " ms");
  }
  const auto local_copy_bytes = [this](const std::string& direction) {
    return &service_.metrics().counter("seqflow_storage_local_copy_bytes_total",
                                       "Bytes moved through memory to or from same-host clients",
                                       {{"direction", direction}});
  };
  local_put_bytes_ = local_copy_bytes("put");
  local_get_bytes_ = local_copy_bytes("get");
  put_bytes_ = &service_.metrics().counter(
      "seqflow_storage_put_bytes_total",
      "Values' bytes of the puts received, over TCP or from same-host memory (a retried put counts each try)");
  register_handlers();
  std::weak_ptr<StorageUnit> weak = storage_;
  service_.metrics().add_collector([this, weak](std::string& out) {
    auto storage = weak.lock();
    if (!storage) return;
    const StorageStats stats = storage->stats();
    out += "# HELP seqflow_storage_bytes Bytes of the values held\n# TYPE seqflow_storage_bytes gauge\n";
    out += "seqflow_storage_bytes " + std::to_string(stats.bytes) + "\n";
    out +=
        "# HELP seqflow_storage_overhead_bytes Memory held per sample and value beside their bytes (an estimate; "
        "max_bytes bounds both)\n# TYPE seqflow_storage_overhead_bytes gauge\n";
    out += "seqflow_storage_overhead_bytes " + std::to_string(stats.overhead_bytes) + "\n";
    out +=
        "# HELP seqflow_storage_samples Samples holding at least one field\n"
        "# TYPE seqflow_storage_samples gauge\n";
    out += "seqflow_storage_samples " + std::to_string(stats.samples) + "\n";
    out +=
        "# HELP seqflow_storage_leases Get replies held for same-host clients to copy\n"
        "# TYPE seqflow_storage_leases gauge\n";
    out += "seqflow_storage_leases " + std::to_string(leases_.held()) + "\n";
    append_capacity_metrics(*storage, out);
  });
}

StorageService::~StorageService() { stop(); }

void StorageService::register_handlers() {
  HandlerTable<StorageService> table(service_, *this);
  table.on_worker(storage_protocol::kPut, &StorageService::put);
  table.on_worker(storage_protocol::kGet, &StorageService::get);
  table.on_worker(storage_protocol::kCommit, &StorageService::commit);
  table.on_worker(storage_protocol::kDiscard, &StorageService::discard);
  table.on_io_thread(storage_protocol::kLocalCopySession, &StorageService::local_copy_session);
  table.on_worker(storage_protocol::kRelease, &StorageService::release);
  table.on_worker(storage_protocol::kClear, &StorageService::clear);
  table.on_worker(storage_protocol::kStats, &StorageService::stats);
  table.on_worker(storage_protocol::kSave, &StorageService::save);
  table.on_worker(storage_protocol::kLoad, &StorageService::load);
  table.on_worker(storage_protocol::kRoom, &StorageService::room);
}

transport::Frames StorageService::put(transport::Frames& args) {
  const storage_protocol::PutRequest request = storage_protocol::decode_put_request(args);
  if (request.local_frames) {
    // Only the memory of the process that opened the named session, and
    // only ranges it signed: never a pid or an address space a message names.
    const auto client = transport::local_copy::sealed_reader(*sessions_, *request.local_frames,
                                                             request_name(storage_protocol::kPut) + " local_frames");
    if (!client) {
      return storage_protocol::encode_put_reply(
          {"no open local-copy session of this unit signed these ranges (or the unit may not read its client): "
           "send the bytes",
           std::nullopt, std::nullopt});
    }
    transport::Frames data = transport::local_copy::read(
        *client, *request.local_frames, request_name(storage_protocol::kPut) + " local_frames",
        transport::wire::column_count(request.columns), options_.service.max_request_bytes);
    local_put_bytes_->increment(static_cast<double>(transport::local_copy::data_bytes(data, 0)));
    args.resize(1);
    std::move(data.begin(), data.end(), std::back_inserter(args));
  }
  put_bytes_->increment(static_cast<double>(transport::local_copy::data_bytes(args, 1)));
  const auto segments = transport::wire::take_column_segments(request.columns, args, 1, request.segment_samples,
                                                              request.samples.global_indexes.size(),
                                                              request_name(storage_protocol::kPut));
  // A put that waits for room holds no worker: the unit answers "full" and
  // its client retries within its own budget.
  std::optional<StorageUnit::Full> full = storage_->try_put_segments(request.samples.keys(), segments, request.ticket);
  if (!full) return storage_protocol::encode_put_reply({});
  return storage_protocol::encode_put_reply({std::nullopt, std::move(full->message), full->ticket});
}

// A waiting put's client asks before it sends the values again, or says it gave up.
transport::Frames StorageService::room(transport::Frames& args) {
  const storage_protocol::RoomRequest request = storage_protocol::decode_room_request(args);
  return storage_protocol::encode_room_reply(request.leave ? storage_->leave_line(request.put, request.ticket)
                                                           : storage_->room_for(request.put, request.ticket));
}

transport::Frames StorageService::get(transport::Frames& args) {
  const storage_protocol::GetRequest request = storage_protocol::decode_get_request(args);
  const auto rows = storage_->get(request.samples.keys(), request.fields);
  transport::Frames out(1);
  storage_protocol::GetReply reply{transport::wire::append_views(rows, request.fields.size(), out), std::nullopt,
                                   std::nullopt};
  // Described (left in this process for the client to copy) only for a
  // client with an open session, which the kernel vouched for.
  const bool session_open = request.local_copy && sessions_->is_open(*request.local_copy);
  if (session_open && transport::local_copy::data_bytes(out, 1) >= transport::local_copy::kMinBytes) {
    transport::Frames data(std::make_move_iterator(out.begin() + 1), std::make_move_iterator(out.end()));
    local_get_bytes_->increment(static_cast<double>(transport::local_copy::data_bytes(data, 0)));
    reply.local_frames = transport::local_copy::describe(data, 0);
    reply.lease = leases_.hold(std::move(data));
    out.resize(1);
  }
  out[0] = storage_protocol::encode_get_reply_header(reply);
  return out;
}

// The second step of a versioned put (its own op, not an admin one): the
// client that staged the write makes it the value readers see, or drops it.
// Open to any admitted client holding the controller's write tag.
storage_protocol::SettleRequest StorageService::settle_request(transport::Frames& args, std::string_view op) const {
  storage_protocol::SettleRequest request = storage_protocol::decode_settle_request(args, op);
  check_write_tag(request.write_tag, op, request.samples.write_version);
  return request;
}

transport::Frames StorageService::commit(transport::Frames& args) {
  const storage_protocol::SettleRequest request = settle_request(args, storage_protocol::kCommit);
  storage_->commit(request.samples.keys(), request.fields);
  return storage_protocol::encode_empty_reply();
}

transport::Frames StorageService::discard(transport::Frames& args) {
  const storage_protocol::SettleRequest request = settle_request(args, storage_protocol::kDiscard);
  storage_->discard(request.samples.keys(), request.fields);
  return storage_protocol::encode_empty_reply();
}

transport::Frames StorageService::local_copy_session(const transport::Frames& args) {
  storage_protocol::decode_bare_request(args, storage_protocol::kLocalCopySession);
  return storage_protocol::encode_local_copy_session_reply(sessions_->address());
}

transport::Frames StorageService::release(transport::Frames& args) {
  return storage_protocol::encode_release_reply(leases_.release(storage_protocol::decode_release_request(args)));
}

transport::Frames StorageService::clear(transport::Frames& args) {
  const storage_protocol::ClearRequest request = storage_protocol::decode_clear_request(args);
  check_controller(request.admin_token, request_name(storage_protocol::kClear));
  // With generations (drops owed since a cut): only data those samples put.
  storage_->clear_generations(request.indexes, request.generations);
  return storage_protocol::encode_empty_reply();
}

transport::Frames StorageService::stats(transport::Frames& args) {
  storage_protocol::decode_bare_request(args, storage_protocol::kStats);
  return storage_protocol::encode_stats_reply(storage_->stats());
}

// A save answers with its file's fingerprint; a load given one refuses a
// file of another save (the client keeps them in the checkpoint's index).
// check_only: that refusal alone, so that a client asks every unit before
// any unit loads.
transport::Frames StorageService::save(transport::Frames& args) {
  const storage_protocol::SaveRequest request = storage_protocol::decode_save_request(args);
  check_controller(request.admin_token, request_name(storage_protocol::kSave));
  const std::string path = checkpoint_root_.resolve(request.path, request_name(storage_protocol::kSave));
  storage_->save(path);
  return storage_protocol::encode_save_reply(durable::framed_file_fingerprint(path).value_or(0));
}

transport::Frames StorageService::load(transport::Frames& args) {
  const storage_protocol::LoadRequest request = storage_protocol::decode_load_request(args);
  check_controller(request.admin_token, request_name(storage_protocol::kLoad));
  const std::string path = checkpoint_root_.resolve(request.path, request_name(storage_protocol::kLoad));
  if (request.fingerprint) {
    const auto found = durable::framed_file_fingerprint(path);
    if (found != *request.fingerprint) {
      throw_invalid("storage checkpoint \"" + path +
                    "\" mixes saves: it is not the file its checkpoint was "
                    "saved with (fingerprint " +
                    (found ? std::to_string(*found) : std::string("none")) + ", the checkpoint says " +
                    std::to_string(*request.fingerprint) + ")");
    }
  }
  if (request.check_only) return storage_protocol::encode_empty_reply();
  if (request.parts.empty()) {
    storage_->load(path);
    return storage_protocol::encode_empty_reply();
  }
  std::vector<std::string> parts;
  parts.reserve(request.parts.size());
  for (const std::string& part : request.parts) {
    parts.push_back(checkpoint_root_.resolve(part, request_name(storage_protocol::kLoad)));
  }
  storage_->load_part(path, parts, [unit = request.unit, units = request.units](int64_t global_index) {
    return transport::unit_of(global_index, units) == unit;
  });
  return storage_protocol::encode_empty_reply();
}

void StorageService::start() {
  service_.start();
  if (options_.controller_endpoint.empty()) return;
  heartbeat_ = std::thread([this] { run_heartbeat(); });
}

void StorageService::stop() {
  {
    std::lock_guard lock(heartbeat_mutex_);
    stopping_ = true;
  }
  heartbeat_stop_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  service_.stop();
}

void StorageService::run_heartbeat() {
  zmq::context_t context(1);
  const std::string advertised = options_.advertise.empty() ? service_.endpoint() : options_.advertise;
  transport::ConnectionOptions connection_options{.timeout = options_.heartbeat,
                                                  .security = options_.controller_security};
  transport::Connection controller(context, options_.controller_endpoint, connection_options);
  Counter& failures = service_.metrics().counter("seqflow_storage_registration_failures_total",
                                                 "Registrations the controller did not confirm");
  std::unique_lock lock(heartbeat_mutex_);
  while (!stopping_) {
    lock.unlock();
    bool joined = true;
    try {
      namespace control = transport::control;
      const transport::Frames reply =
          controller.call(control::kRegisterStorage,
                          control::encode_register_storage_request({advertised, instance_id_, admin_token_,
                                                                    incarnation_.load(), control::kProtocolVersion}));
      const uint64_t incarnation = *control::decode_storage_units_reply(reply, control::kRegisterStorage).incarnation;
      if (incarnation != incarnation_.load()) {
        // A controller that knows nothing of what this unit holds: drop it
        // all, then register again at once, now with its incarnation.
        storage_->clear_all();
        incarnation_.store(incarnation);
        joined = false;
      }
    } catch (const Error&) {
      failures.increment();  // the controller is down or restarting: retry next beat
    }
    lock.lock();
    if (joined) heartbeat_stop_.wait_for(lock, options_.heartbeat, [this] { return stopping_; });
  }
}

}  // namespace seqflow::server
