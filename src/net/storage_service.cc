#include "net/storage_service.h"

#include <bit>
#include <random>

#include "net/connection.h"
#include "net/wire_codec.h"
#include "seqflow/error.h"

namespace seqflow::net {
namespace {

using wire::Header;
using wire::Json;

uint64_t random_instance_id() {
  std::random_device device;
  return (uint64_t{device()} << 32) ^ uint64_t{device()};
}

}  // namespace

StorageService::StorageService(StorageServiceOptions options)
    : options_(std::move(options)),
      instance_id_(random_instance_id()),
      storage_(std::make_shared<StorageUnit>(options_.storage)),
      service_(options_.service) {
  if (options_.heartbeat.count() <= 0) {
    throw_invalid("heartbeat must be positive, got " + std::to_string(options_.heartbeat.count()) + " ms");
  }
  register_handlers();
  std::weak_ptr<StorageUnit> weak = storage_;
  service_.metrics().add_collector([weak](std::string& out) {
    auto storage = weak.lock();
    if (!storage) return;
    const StorageStats stats = storage->stats();
    out += "# HELP seqflow_storage_bytes Bytes of the values held\n# TYPE seqflow_storage_bytes gauge\n";
    out += "seqflow_storage_bytes " + std::to_string(stats.bytes) + "\n";
    out +=
        "# HELP seqflow_storage_samples Samples holding at least one field\n"
        "# TYPE seqflow_storage_samples gauge\n";
    out += "seqflow_storage_samples " + std::to_string(stats.samples) + "\n";
  });
}

StorageService::~StorageService() { stop(); }

void StorageService::register_handlers() {
  StorageUnit& storage = *storage_;
  service_.handle("put", [&storage](Frames& args) {
    const Json json = wire::read_header(args, 0, "put request");
    const Header header(json, "put request", {"indexes", "columns"});
    const auto indexes = header.numbers<int64_t>("indexes");
    const auto columns = wire::take_columns(header.at("columns"), args, 1, indexes.size(), "put request");
    storage.put(indexes, columns);
    return wire::header_message(Json::object());
  });
  service_.handle("get", [&storage](Frames& args) {
    const Json json = wire::read_header(args, 0, "get request");
    const Header header(json, "get request", {"indexes", "fields"});
    const auto fields = header.texts("fields");
    const auto rows = storage.get(header.numbers<int64_t>("indexes"), fields);
    Frames out(1);
    const Json views = wire::append_views(rows, fields.size(), out);
    out[0] = wire::header_frame(Json{{"fields", views}});
    return out;
  });
  service_.handle("clear", [&storage](Frames& args) {
    const Json json = wire::read_header(args, 0, "clear request");
    storage.clear(Header(json, "clear request", {"indexes"}).numbers<int64_t>("indexes"));
    return wire::header_message(Json::object());
  });
  service_.handle("clear_all", [&storage](Frames& args) {
    const Json json = wire::read_header(args, 0, "clear_all request");
    const Header header(json, "clear_all request", {});
    storage.clear_all();
    return wire::header_message(Json::object());
  });
  service_.handle("stats", [&storage](Frames& args) {
    const Json json = wire::read_header(args, 0, "stats request");
    const Header header(json, "stats request", {});
    const StorageStats stats = storage.stats();
    return wire::header_message(Json{{"samples", stats.samples}, {"bytes", stats.bytes}});
  });
  service_.handle("save", [&storage](Frames& args) {
    const Json json = wire::read_header(args, 0, "save request");
    storage.save(Header(json, "save request", {"path"}).text("path"));
    return wire::header_message(Json::object());
  });
  service_.handle("load", [&storage](Frames& args) {
    const Json json = wire::read_header(args, 0, "load request");
    storage.load(Header(json, "load request", {"path"}).text("path"));
    return wire::header_message(Json::object());
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
  ConnectionOptions connection_options{options_.heartbeat, options_.controller_security};
  Connection controller(context, options_.controller_endpoint, connection_options);
  Counter& failures = service_.metrics().counter("seqflow_storage_registration_failures_total",
                                                 "Registrations the controller did not confirm");
  std::unique_lock lock(heartbeat_mutex_);
  while (!stopping_) {
    lock.unlock();
    try {
      // As int64: the wire's integers are signed.
      controller.call("register_storage",
                      wire::header_message(Json{{"endpoint", advertised},
                                                {"instance", std::bit_cast<int64_t>(instance_id_)}}));
    } catch (const Error&) {
      failures.increment();  // the controller is down or restarting: retry next beat
    }
    lock.lock();
    heartbeat_stop_.wait_for(lock, options_.heartbeat, [this] { return stopping_; });
  }
}

}  // namespace seqflow::net
