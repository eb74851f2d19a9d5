#include "server/storage_service.h"

#include <bit>
#include <iterator>

#include "common/constant_time.h"
#include "common/random_id.h"
#include "transport/connection.h"
#include "transport/local_copy.h"
#include "transport/local_copy_session.h"
#include "transport/wire_codec.h"
#include "transport/write_tag.h"
#include "seqflow/error.h"
#include "durable/framed_file.h"
#include "storage/checkpoint.h"

namespace seqflow::server {
namespace {

using transport::wire::Header;
using transport::wire::Json;

std::string random_token() {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string token;
  for (int half = 0; half < 2; ++half) {
    for (uint64_t bits = random_u64(), i = 0; i < 16; ++i, bits >>= 4) token += kDigits[bits & 15];
  }
  return token;
}

}  // namespace

void StorageService::check_write_tag(const Header& header, const std::string& op, uint64_t version) const {
  if (version == 0) return;  // refused by the storage itself, naming write_version
  const bool tagged = header.has("write_tag") && header.at("write_tag").is_number_unsigned() &&
                      header.at("write_tag").get<uint64_t>() == transport::write_tag(admin_token_, version);
  if (!tagged) {
    throw Error(ErrorCode::kPermissionDenied, op + " of write_version " + std::to_string(version) +
                                                  " refused: it needs the write_tag its controller handed out");
  }
}

void StorageService::check_controller(const Header& header) const {
  if (!header.has("admin_token") || !equal_in_constant_time(header.text("admin_token"), admin_token_)) {
    throw Error(ErrorCode::kPermissionDenied,
                header.what() + " refused: only the controller this unit registered with may clear, save or load it");
  }
}

StorageService::StorageService(StorageServiceOptions options)
    : options_(std::move(options)),
      checkpoint_root_(options_.checkpoint_root),
      instance_id_(random_u64()),
      admin_token_(random_token()),
      storage_(std::make_shared<StorageUnit>(options_.storage)),
      leases_(options_.lease_lifetime),
      sessions_(std::make_unique<transport::local_copy::SessionListener>()),
      service_(options_.service) {
  if (options_.heartbeat.count() <= 0) {
    throw_invalid("heartbeat must be positive, got " + std::to_string(options_.heartbeat.count()) + " ms");
  }
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
  });
}

StorageService::~StorageService() { stop(); }

void StorageService::register_handlers() {
  StorageUnit& storage = *storage_;
  const size_t max_request_bytes = options_.service.max_request_bytes;
  const auto local_copy_bytes = [this](const std::string& direction) -> Counter& {
    return service_.metrics().counter("seqflow_storage_local_copy_bytes_total",
                                      "Bytes moved through memory to or from same-host clients",
                                      {{"direction", direction}});
  };
  Counter& local_puts = local_copy_bytes("put");
  Counter& local_gets = local_copy_bytes("get");
  transport::local_copy::SessionListener& sessions = *sessions_;
  service_.handle("put", [&storage, &sessions, &local_puts, max_request_bytes](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "put request");
    const Header header(
        json, "put request",
        {"indexes", "partitions", "partition_ends", "generations", "write_version", "columns", "local_frames"});
    const transport::wire::SampleKeyColumns samples = transport::wire::read_sample_keys(header);
    const auto& indexes = samples.global_indexes;
    if (header.has("local_frames")) {
      const Json& description = header.at("local_frames");
      // Only the memory of the process that opened the named session, and
      // only ranges it signed: never a pid or an address space a message names.
      const auto client = transport::local_copy::sealed_reader(sessions, description, "put request local_frames");
      if (!client) {
        return transport::wire::header_message(
            Json{{"local_copy_refused",
                  "no open local-copy session of this unit signed these ranges (or the unit may not read "
                  "its client): send the bytes"}});
      }
      const Json& columns = header.at("columns");
      transport::Frames data = transport::local_copy::read(*client, description, "put request local_frames",
                                                           columns.is_array() ? columns.size() : 0, max_request_bytes);
      local_puts.increment(static_cast<double>(transport::local_copy::data_bytes(data, 0)));
      args.resize(1);
      std::move(data.begin(), data.end(), std::back_inserter(args));
    }
    const auto columns = transport::wire::take_columns(header.at("columns"), args, 1, indexes.size(), "put request");
    storage.put(samples.keys(), columns);
    return transport::wire::header_message(Json::object());
  });
  service_.handle("get", [this, &storage, &sessions, &local_gets](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "get request");
    const Header header(
        json, "get request",
        {"indexes", "partitions", "partition_ends", "generations", "read_versions", "fields", "local_copy"});
    const auto fields = header.texts("fields");
    const auto rows = storage.get(transport::wire::read_sample_keys(header).keys(), fields);
    transport::Frames out(1);
    Json reply{{"fields", transport::wire::append_views(rows, fields.size(), out)}};
    // Described (left in this process for the client to copy) only for a
    // client with an open session, which the kernel vouched for.
    const bool session_open = header.has("local_copy") && header.at("local_copy").is_binary() &&
                              sessions.is_open(header.at("local_copy").get_binary());
    if (session_open && transport::local_copy::data_bytes(out, 1) >= transport::local_copy::kMinBytes) {
      transport::Frames data(std::make_move_iterator(out.begin() + 1), std::make_move_iterator(out.end()));
      local_gets.increment(static_cast<double>(transport::local_copy::data_bytes(data, 0)));
      reply["local_frames"] = transport::local_copy::describe(data, 0);
      reply["lease"] = std::bit_cast<int64_t>(leases_.hold(std::move(data)));
      out.resize(1);
    }
    out[0] = transport::wire::header_frame(reply);
    return out;
  });
  // The second step of a versioned put (its own op, not an admin one): the
  // client that staged the write makes it the value readers see.
  // commit and discard: part of a data put (a put's promotion or its undo), open to any admitted client.
  for (const std::string op : {"commit", "discard"}) {
    service_.handle(op, [this, &storage, op](transport::Frames& args) {
      const Json json = transport::wire::read_header(args, 0, op + " request");
      const Header header(
          json, op + " request",
          {"indexes", "partitions", "partition_ends", "generations", "write_version", "fields", "write_tag"});
      const transport::wire::SampleKeyColumns samples = transport::wire::read_sample_keys(header);
      check_write_tag(header, op, samples.keys().write_version);
      if (op == "commit") {
        storage.commit(samples.keys(), header.texts("fields"));
      } else {
        storage.discard(samples.keys(), header.texts("fields"));
      }
      return transport::wire::header_message(Json::object());
    });
  }
  service_.handle("local_copy_session", nullptr, [&sessions](const transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "local_copy_session request");
    const Header header(json, "local_copy_session request", {});
    return transport::wire::header_message(Json{{"address", sessions.address()}});
  });
  service_.handle("release", [this](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "release request");
    const Header header(json, "release request", {"lease"});
    return transport::wire::header_message(
        Json{{"held", leases_.release(std::bit_cast<uint64_t>(header.integer("lease")))}});
  });
  service_.handle("clear", [this, &storage](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "clear request");
    const Header header(json, "clear request", {"indexes", "generations", "admin_token"});
    check_controller(header);
    // With generations (drops owed since a cut): only data those samples put.
    storage.clear_generations(header.numbers<int64_t>("indexes"), header.has("generations")
                                                                      ? header.numbers<uint64_t>("generations")
                                                                      : std::vector<uint64_t>{});
    return transport::wire::header_message(Json::object());
  });
  service_.handle("stats", [&storage](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "stats request");
    const Header header(json, "stats request", {});
    const StorageStats stats = storage.stats();
    return transport::wire::header_message(
        Json{{"samples", stats.samples}, {"bytes", stats.bytes}, {"overhead_bytes", stats.overhead_bytes}});
  });
  // A save answers with its file's fingerprint; a load given one refuses a
  // file of another save (the client keeps them in the checkpoint's index).
  // check_only: that refusal alone, so that a client asks every unit before
  // any unit loads.
  service_.handle("save", [this, &storage](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "save request");
    const Header header(json, "save request", {"path", "admin_token"});
    check_controller(header);
    const std::string path = checkpoint_root_.resolve(header.text("path"), "save request");
    storage.save(path);
    return transport::wire::header_message(Json{{"fingerprint", durable::framed_file_fingerprint(path).value_or(0)}});
  });
  service_.handle("load", [this, &storage](transport::Frames& args) {
    const Json json = transport::wire::read_header(args, 0, "load request");
    const Header header(json, "load request", {"path", "fingerprint", "check_only", "admin_token"});
    check_controller(header);
    const std::string path = checkpoint_root_.resolve(header.text("path"), "load request");
    if (header.has("fingerprint")) {
      const Json& given = header.at("fingerprint");
      if (!given.is_number_unsigned()) header.fail("fingerprint", "must be an unsigned integer");
      const auto expected = given.get<uint64_t>();
      const auto found = durable::framed_file_fingerprint(path);
      if (found != expected) {
        throw_invalid("storage checkpoint \"" + path +
                      "\" mixes saves: it is not the file its checkpoint was "
                      "saved with (fingerprint " +
                      (found ? std::to_string(*found) : std::string("none")) + ", the checkpoint says " +
                      std::to_string(expected) + ")");
      }
    }
    if (header.has("check_only") && header.boolean("check_only"))
      return transport::wire::header_message(Json::object());
    storage.load(path);
    return transport::wire::header_message(Json::object());
  });
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
      // As int64: the wire's integers are signed.
      const transport::Frames reply = controller.call(
          "register_storage",
          transport::wire::header_message(Json{{"endpoint", advertised},
                                               {"instance", std::bit_cast<int64_t>(instance_id_)},
                                               {"admin_token", admin_token_},
                                               {"incarnation", std::bit_cast<int64_t>(incarnation_.load())}}));
      const Json json = transport::wire::read_header(reply, 0, "register_storage reply");
      const Header header(json, "register_storage reply", {"units", "expected", "incarnation"});
      const auto incarnation = std::bit_cast<uint64_t>(header.integer("incarnation"));
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
