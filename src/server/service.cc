#include "server/service.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string_view>
#include <system_error>
#include <functional>
#include <utility>

#include "transport/envelope.h"
#include "transport/zmq_message_memory.h"
#include "seqflow/error.h"

namespace seqflow::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kPingOp = "ping";
constexpr int kHighWaterMark = 10000;         // messages per peer; ZeroMQ's 1000 is low for bursts
constexpr int kCloseLingerMs = 500;           // lets replies of finishing handlers flush, boundedly
constexpr size_t kMaxMessagesPerWakeup = 64;  // then send replies again: neither side starves
constexpr auto kLastReplyGrace = std::chrono::milliseconds(200);
constexpr int kHeartbeatMs = 2000;  // forget clients that vanished without closing TCP
constexpr int kHeartbeatTimeoutMs = 6000;
// A disconnect event names a descriptor, which a new connection may reuse:
// each deferral from it is probed (a reply only a gone client cannot take)
// this often, this many times, before it is taken as alive.
constexpr auto kProbeInterval = std::chrono::milliseconds(200);
constexpr int kProbes = 5;
// A request deferred this soon after its descriptor's disconnect event may
// have come from the closed connection (read from its queue after the event):
// it is probed as well.
constexpr auto kRecentDisconnect = std::chrono::seconds(2);

thread_local std::optional<Clock::time_point> current_deadline;

// Sets the handling thread's request deadline for one call.
class DeadlineScope {
 public:
  explicit DeadlineScope(std::optional<Clock::time_point> deadline) { current_deadline = deadline; }
  ~DeadlineScope() { current_deadline.reset(); }
  DeadlineScope(const DeadlineScope&) = delete;
  DeadlineScope& operator=(const DeadlineScope&) = delete;
};

std::string milliseconds_since(Clock::time_point start) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()) + " ms";
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string monitor_endpoint() {
  static std::atomic<uint64_t> next{0};
  return "inproc://seqflow-service-monitor-" + std::to_string(next.fetch_add(1));
}

zmq::message_t copy_message(const zmq::message_t& message) { return zmq::message_t(message.data(), message.size()); }

transport::Frames error_reply(zmq::message_t routing_id, uint64_t id, ErrorCode code, const std::string& message) {
  transport::Frames reply;
  reply.push_back(std::move(routing_id));
  reply.push_back(transport::encode_reply_envelope(id, code));
  reply.push_back(transport::copy_frame(message));
  return reply;
}

// Runs a handler (`call` returns its result frames, or nullopt when it
// declines) and makes the reply to request `id` from its results or its
// exception. `failed`: the reply is an error.
template <typename Call>
std::optional<transport::Frames> reply_of(const std::string& op, zmq::message_t& routing_id, uint64_t id, Call&& call,
                                          bool& failed) {
  failed = true;
  try {
    std::optional<transport::Frames> results = call();
    if (!results) return std::nullopt;
    transport::Frames reply;
    reply.reserve(results->size() + 2);
    reply.push_back(std::move(routing_id));
    reply.push_back(transport::encode_reply_envelope(id, std::nullopt));
    for (auto& result : *results) reply.push_back(std::move(result));
    failed = false;
    return reply;
  } catch (const Error& error) {
    return error_reply(std::move(routing_id), id, error.code(), error.what());
  } catch (const std::exception& error) {
    return error_reply(std::move(routing_id), id, ErrorCode::kInternal,
                       "operation '" + op + "' failed: " + error.what());
  } catch (...) {
    return error_reply(std::move(routing_id), id, ErrorCode::kInternal,
                       "operation '" + op + "' failed with a non-standard exception");
  }
}

// A request from a key the ZAP handler admitted with the "service" role
// (ZeroMQ's "User-Id" message property; see transport::ZapHandler).
bool from_a_service(const zmq::message_t& frame) {
  const char* user_id = zmq_msg_gets(frame.handle(), "User-Id");
  return user_id != nullptr && std::string_view(user_id) == transport::kServiceUserId;
}

}  // namespace

void check_bind_address(const std::string& bind) {
  if (!bind.starts_with("tcp://")) return;
  const std::string port = bind.substr(bind.rfind(':') + 1);
  if (port == "*") return;
  const bool digits = !port.empty() && port.size() <= 5 &&
                      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || std::stoi(port) > 65535) {
    throw_invalid("bind address '" + bind + "': the port must be 0 (a free one) or 1..65535, got '" + port + "'");
  }
}

std::optional<std::chrono::steady_clock::time_point> request_deadline() { return current_deadline; }

void check_request_open(std::string_view what) {
  if (current_deadline && Clock::now() > *current_deadline) {
    throw Error(ErrorCode::kTimeout,
                std::string(what) + " not done: its client's deadline passed before it could start; nothing changed");
  }
}

struct Service::Route {
  std::string op;
  bool services_only = false;
  Handler handler;           // empty: try_inline always answers
  InlineHandler try_inline;  // empty: always a worker
  Counter* requests = nullptr;
  Counter* errors = nullptr;
  Counter* expired = nullptr;
  Histogram* latency = nullptr;
};

struct Service::Job {
  zmq::message_t routing_id;
  uint64_t id = 0;
  const Route* route = nullptr;
  transport::Frames args;
  Clock::time_point received;
  std::optional<Clock::time_point> deadline;  // from the client's budget
  int source_fd = -1;                         // the connection's descriptor (ZMQ_SRCFD)
};

struct Service::Reply {
  transport::Frames frames;
  std::function<void()> undelivered;
};

struct Service::Deferral {
  zmq::message_t routing_id;
  uint64_t request_id = 0;
  const Route* route = nullptr;
  Clock::time_point received;
  int source_fd = -1;
  std::function<void()> client_gone;
  Clock::time_point probe_at;  // while a suspect: its connection may be gone
  int probes_left = 0;
};

// What defer_reply() and on_undelivered() act on.
struct Service::Call {
  Service* service = nullptr;
  Job* job = nullptr;
  bool inline_call = false;
  uint64_t deferral = 0;  // nonzero: the handler deferred its reply
  std::function<void()> undelivered;
};

thread_local Service::Call* Service::current_call_ = nullptr;

DeferredReply defer_reply(std::function<void()> client_gone) {
  Service::Call* call = Service::current_call_;
  if (call == nullptr || !call->inline_call || call->deferral != 0) {
    throw Error(ErrorCode::kInternal, "defer_reply: only an InlineHandler may defer its reply, once");
  }
  call->deferral = call->service->defer(*call->job, std::move(client_gone));
  return DeferredReply(call->service, call->deferral);
}

void on_undelivered(std::function<void()> undelivered) {
  Service::Call* call = Service::current_call_;
  if (call == nullptr) throw Error(ErrorCode::kInternal, "on_undelivered: called outside a handler");
  call->undelivered = std::move(undelivered);
}

DeferredReply::DeferredReply(DeferredReply&& other) noexcept
    : service_(std::exchange(other.service_, nullptr)), id_(other.id_) {}

DeferredReply& DeferredReply::operator=(DeferredReply&& other) noexcept {
  if (this != &other) {
    if (service_ != nullptr) service_->forget_deferred(id_);
    service_ = std::exchange(other.service_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

DeferredReply::~DeferredReply() {
  if (service_ != nullptr) service_->forget_deferred(id_);
}

void DeferredReply::send(transport::Frames results, std::function<void()> undelivered) {
  if (service_ == nullptr) throw Error(ErrorCode::kInternal, "DeferredReply::send: the reply was sent already");
  std::exchange(service_, nullptr)
      ->send_deferred(id_, std::move(results), ErrorCode::kInternal, {}, std::move(undelivered));
}

void DeferredReply::fail(ErrorCode code, const std::string& message) {
  if (service_ == nullptr) throw Error(ErrorCode::kInternal, "DeferredReply::fail: the reply was sent already");
  std::exchange(service_, nullptr)->send_deferred(id_, std::nullopt, code, message, nullptr);
}

Service::Service(ServiceOptions options) : options_(std::move(options)) {
  transport::keep_large_zmq_messages_in_block_cache();  // a large put lands in reused, huge-page memory
  if (options_.max_workers == 0) throw_invalid("ServiceOptions.max_workers must be >= 1, got 0");
  if (options_.min_workers > options_.max_workers) {
    throw_invalid("ServiceOptions.min_workers (" + std::to_string(options_.min_workers) +
                  ") must not exceed max_workers (" + std::to_string(options_.max_workers) + ")");
  }
  if (options_.max_request_bytes == 0) throw_invalid("ServiceOptions.max_request_bytes must be > 0, got 0");
  check_bind_address(options_.bind);
  if (options_.security.enabled) {
    transport::check_curve_key(options_.security.server_keys.secret_key,
                               "ServiceOptions.security.server_keys.secret_key");
    transport::check_curve_key(options_.security.server_keys.public_key,
                               "ServiceOptions.security.server_keys.public_key");
    if (options_.security.allowed_client_keys.empty()) {
      throw_invalid(
          "ServiceOptions.security.allowed_client_keys is empty: a CURVE service admits only listed client keys");
    }
    for (const auto& key : options_.security.allowed_client_keys) {
      transport::check_curve_key(key, "ServiceOptions.security.allowed_client_keys entry");
    }
    for (const auto& key : options_.security.service_keys) {
      transport::check_curve_key(key, "ServiceOptions.security.service_keys entry");
    }
  }
  dropped_messages_ =
      &metrics_.counter("seqflow_dropped_messages_total",
                        "Messages dropped: too malformed to answer (no envelope), or replies the socket refused.");
  const std::string rejected_help = "Requests answered with an error before reaching a handler, by reason.";
  rejected_unknown_op_ =
      &metrics_.counter("seqflow_rejected_requests_total", rejected_help, {{"reason", "unknown_op"}});
  rejected_malformed_ = &metrics_.counter("seqflow_rejected_requests_total", rejected_help, {{"reason", "malformed"}});
  rejected_too_large_ = &metrics_.counter("seqflow_rejected_requests_total", rejected_help, {{"reason", "too_large"}});
  rejected_permission_ =
      &metrics_.counter("seqflow_rejected_requests_total", rejected_help, {{"reason", "permission_denied"}});
  in_flight_ = &metrics_.gauge("seqflow_requests_in_flight", "Requests received and not yet answered.");
  worker_count_ = &metrics_.gauge("seqflow_service_workers", "Worker threads started (they stay until stop).");
  deferred_count_ = &metrics_.gauge("seqflow_requests_deferred",
                                    "Requests waiting without a thread (blocking fetches) for a later reply.");
  clients_gone_ = &metrics_.counter("seqflow_deferred_clients_gone_total",
                                    "Deferred requests dropped because their client's connection closed.");
  handle(kPingOp, nullptr, [](const transport::Frames&) { return transport::Frames(); });
}

Service::~Service() { stop(); }

void Service::handle(std::string_view op, Handler handler, InlineHandler try_inline) {
  add_route(std::string(op), std::move(handler), std::move(try_inline), false);
}

void Service::handle_services_only(std::string_view op, Handler handler, InlineHandler try_inline) {
  add_route(std::string(op), std::move(handler), std::move(try_inline), true);
}

std::vector<std::string> Service::ops() const {
  std::vector<std::string> out;
  out.reserve(routes_.size());
  for (const auto& [op, route] : routes_) out.push_back(op);
  std::sort(out.begin(), out.end());
  return out;
}

void Service::add_route(std::string op, Handler handler, InlineHandler try_inline, bool services_only) {
  if (started_) throw_invalid("Service::handle('" + op + "') must come before start()");
  transport::check_op_name(op);
  if (routes_.count(op) > 0) throw_invalid("Service::handle: operation '" + op + "' already has a handler");
  if (!handler && !try_inline) throw_invalid("Service::handle: operation '" + op + "' has no handler");
  auto route = std::make_unique<Route>();
  route->op = op;
  route->services_only = services_only;
  route->handler = std::move(handler);
  route->try_inline = std::move(try_inline);
  const MetricLabels labels = {{"op", op}};
  route->requests = &metrics_.counter("seqflow_requests_total", "Requests answered, by operation.", labels);
  route->errors =
      &metrics_.counter("seqflow_request_errors_total", "Requests answered with an error, by operation.", labels);
  route->expired =
      &metrics_.counter("seqflow_requests_expired_total",
                        "Requests not run: their client's deadline passed before a worker took them.", labels);
  route->latency = &metrics_.histogram("seqflow_request_duration_seconds",
                                       "Time from receiving a request to its reply, by operation.", labels);
  routes_.emplace(std::move(op), std::move(route));
}

void Service::start() {
  if (started_) throw_invalid("Service::start: the service on '" + options_.bind + "' is already started");
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    throw Error(ErrorCode::kInternal, std::string("Service::start: eventfd failed: ") + std::strerror(errno));
  }
  const auto fail = [this](Error error) {
    monitor_.close();
    router_.close();
    zap_handler_.reset();
    ::close(wake_fd_);
    wake_fd_ = -1;
    throw error;
  };
  try {
    open_router();
    open_monitor();
  } catch (const zmq::error_t& error) {
    fail(Error(ErrorCode::kInternal, "Service on '" + options_.bind + "' cannot set up its socket: " + error.what()));
  }
  try {
    router_.bind(options_.bind);
  } catch (const zmq::error_t& error) {
    fail(Error(ErrorCode::kInvalidArgument, "Service cannot bind to '" + options_.bind + "': " + error.what()));
  }
  endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  started_ = true;
  try {
    {
      std::lock_guard lock(jobs_mutex_);
      for (size_t i = 0; i < options_.min_workers; ++i) workers_.emplace_back(&Service::run_worker, this);
      worker_count_->set(static_cast<double>(workers_.size()));
    }
    // The router moves to the I/O thread; thread creation is the memory
    // barrier ZeroMQ asks for when a socket changes threads.
    io_thread_ = std::thread(&Service::run_io, this);
  } catch (const std::system_error& error) {
    stop();
    throw Error(ErrorCode::kInternal, "Service on '" + endpoint_ + "' cannot start its threads: " + error.what());
  }
}

void Service::open_router() {
  router_ = zmq::socket_t(context_, zmq::socket_type::router);
  router_.set(zmq::sockopt::linger, kCloseLingerMs);
  router_.set(zmq::sockopt::rcvhwm, kHighWaterMark);
  router_.set(zmq::sockopt::sndhwm, kHighWaterMark);
  router_.set(zmq::sockopt::heartbeat_ivl, kHeartbeatMs);
  router_.set(zmq::sockopt::heartbeat_timeout, kHeartbeatTimeoutMs);
  // A reply to a client that is gone fails instead of vanishing: the
  // handler's `undelivered` then undoes what the reply handed out.
  router_.set(zmq::sockopt::router_mandatory, true);
  const size_t limit = options_.max_request_bytes;
  router_.set(zmq::sockopt::maxmsgsize,
              limit > static_cast<size_t>(std::numeric_limits<int64_t>::max()) - kMaxMessageSlackBytes
                  ? int64_t{-1}
                  : static_cast<int64_t>(limit + kMaxMessageSlackBytes));
  const transport::ServerSecurity& security = options_.security;
  if (security.enabled) {
    std::vector<std::string> service_keys = security.service_keys;
    service_keys.push_back(security.server_keys.public_key);
    zap_handler_ = std::make_unique<transport::ZapHandler>(context_, service_keys, security.allowed_client_keys);
    router_.set(zmq::sockopt::zap_domain, "seqflow");
    router_.set(zmq::sockopt::curve_server, true);
    router_.set(zmq::sockopt::curve_secretkey, security.server_keys.secret_key);
  }
}

void Service::open_monitor() {
  const std::string endpoint = monitor_endpoint();
  if (zmq_socket_monitor(router_.handle(), endpoint.c_str(), ZMQ_EVENT_DISCONNECTED) != 0) throw zmq::error_t();
  monitor_ = zmq::socket_t(context_, zmq::socket_type::pair);
  monitor_.set(zmq::sockopt::linger, 0);
  monitor_.connect(endpoint);
}

void Service::stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(jobs_mutex_);
    stopping_ = true;  // from here on the I/O thread queues nothing and starts no worker
    in_flight_->add(-static_cast<double>(jobs_.size()));
    jobs_.clear();
    workers.swap(workers_);
  }
  jobs_ready_.notify_all();
  for (auto& worker : workers) worker.join();
  io_stop_ = true;  // after the workers: the I/O thread then sends every last reply
  wake_io();
  if (io_thread_.joinable()) {
    io_thread_.join();
  } else {
    monitor_.close();
    router_.close();  // start() failed before the I/O thread took the socket
  }
  std::vector<Reply> unsent;
  {
    std::lock_guard lock(replies_mutex_);
    replies_closed_ = true;  // a DeferredReply sent from now on goes nowhere
    unsent.swap(replies_);
  }
  for (const Reply& reply : unsent) run_undelivered(reply.undelivered);
  {
    std::lock_guard lock(deferred_mutex_);
    in_flight_->add(-static_cast<double>(deferred_.size()));
    deferred_count_->set(0);
    deferred_.clear();
  }
  zap_handler_.reset();
  context_.close();
  std::lock_guard lock(replies_mutex_);
  ::close(wake_fd_);
  wake_fd_ = -1;
}

std::string Service::endpoint() const { return endpoint_; }

void Service::wake_io() {
  // An eventfd counter only saturates after 2^64-2 writes: this never fails
  // in a way that could lose a wake-up.
  [[maybe_unused]] const ssize_t written = ::eventfd_write(wake_fd_, 1);
}

void Service::queue_reply(transport::Frames reply, std::function<void()> undelivered) {
  {
    std::lock_guard lock(replies_mutex_);  // also keeps stop() from closing the eventfd meanwhile
    if (!replies_closed_) {
      replies_.push_back(Reply{std::move(reply), std::move(undelivered)});
      wake_io();
      return;
    }
  }
  // Stopped: the reply reaches nobody.
  run_undelivered(undelivered);
}

void Service::run_undelivered(const std::function<void()>& undelivered) {
  if (!undelivered) return;
  try {
    undelivered();
  } catch (const std::exception&) {
    dropped_messages_->increment();  // undoing is best effort; the caller must go on
  }
}

uint64_t Service::defer(Job& job, std::function<void()> client_gone) {
  Deferral deferral;
  deferral.routing_id = copy_message(job.routing_id);
  deferral.request_id = job.id;
  deferral.route = job.route;
  deferral.received = job.received;
  deferral.source_fd = job.source_fd;
  deferral.client_gone = std::move(client_gone);
  std::lock_guard lock(deferred_mutex_);
  const uint64_t id = next_deferral_++;
  const auto now = Clock::now();
  if (const auto closed = disconnected_at_.find(job.source_fd);
      closed != disconnected_at_.end() && now - closed->second < kRecentDisconnect) {
    deferral.probe_at = now;
    deferral.probes_left = kProbes;
    suspects_.insert(id);
  }
  deferred_.emplace(id, std::move(deferral));
  deferred_count_->set(static_cast<double>(deferred_.size()));
  in_flight_->add(1);
  return id;
}

void Service::forget_deferred(uint64_t id) {
  std::lock_guard lock(deferred_mutex_);
  if (deferred_.erase(id) == 0) return;
  deferred_count_->set(static_cast<double>(deferred_.size()));
  in_flight_->add(-1);
}

void Service::send_deferred(uint64_t id, std::optional<transport::Frames> results, ErrorCode code,
                            const std::string& message, std::function<void()> undelivered) {
  Deferral deferral;
  {
    std::unique_lock lock(deferred_mutex_);
    const auto found = deferred_.find(id);
    if (found == deferred_.end()) {
      // Its client is gone (or the service stopped): nobody will read it.
      lock.unlock();  // `undelivered` may take other locks (the controller's)
      if (results && undelivered) undelivered();
      return;
    }
    deferral = std::move(found->second);
    deferred_.erase(found);
    deferred_count_->set(static_cast<double>(deferred_.size()));
    in_flight_->add(-1);
  }
  const Route& route = *deferral.route;
  route.requests->increment();
  route.latency->observe(seconds_since(deferral.received));
  if (!results) {
    route.errors->increment();
    queue_reply(error_reply(std::move(deferral.routing_id), deferral.request_id, code, message), nullptr);
    return;
  }
  transport::Frames reply;
  reply.reserve(results->size() + 2);
  reply.push_back(std::move(deferral.routing_id));
  reply.push_back(transport::encode_reply_envelope(deferral.request_id, std::nullopt));
  for (auto& result : *results) reply.push_back(std::move(result));
  queue_reply(std::move(reply), std::move(undelivered));
}

// A monitor event is [u16 event, u32 value][endpoint]; a disconnect's value
// is the connection's descriptor.
void Service::read_disconnects() {
  while (true) {
    zmq::message_t event;
    if (!monitor_.recv(event, zmq::recv_flags::dontwait)) return;
    bool more = event.more();
    while (more) {
      zmq::message_t rest;
      (void)monitor_.recv(rest, zmq::recv_flags::none);
      more = rest.more();
    }
    if (event.size() < sizeof(uint16_t) + sizeof(uint32_t)) continue;
    uint16_t code = 0;
    uint32_t fd = 0;
    std::memcpy(&code, event.data(), sizeof code);
    std::memcpy(&fd, static_cast<const char*>(event.data()) + sizeof code, sizeof fd);
    if (code != ZMQ_EVENT_DISCONNECTED) continue;
    const auto now = Clock::now();
    std::lock_guard lock(deferred_mutex_);
    disconnected_at_[static_cast<int>(fd)] = now;
    for (auto& [id, deferral] : deferred_) {
      if (deferral.source_fd != static_cast<int>(fd)) continue;
      deferral.probe_at = now;
      deferral.probes_left = kProbes;
      suspects_.insert(id);
    }
  }
}

std::optional<Service::Clock::time_point> Service::probe_suspects(zmq::socket_t& router) {
  std::vector<std::function<void()>> gone;
  std::optional<Clock::time_point> next;
  {
    std::lock_guard lock(deferred_mutex_);
    if (suspects_.empty()) return std::nullopt;
    const auto now = Clock::now();
    for (auto suspect = suspects_.begin(); suspect != suspects_.end();) {
      const auto found = deferred_.find(*suspect);
      if (found == deferred_.end()) {  // answered or forgotten meanwhile
        suspect = suspects_.erase(suspect);
        continue;
      }
      Deferral& deferral = found->second;
      if (deferral.probe_at > now) {
        next = next ? std::min(*next, deferral.probe_at) : deferral.probe_at;
        ++suspect;
        continue;
      }
      // Id 0 answers no request: clients discard it (transport/envelope.h).
      // A router that still knows the peer sends it; one that does not
      // refuses it with EHOSTUNREACH.
      zmq::message_t routing_id = copy_message(deferral.routing_id);
      zmq::message_t probe = transport::encode_reply_envelope(0, std::nullopt);
      bool known = true;
      try {
        if (router.send(routing_id, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
          (void)router.send(probe, zmq::send_flags::dontwait);
        }
      } catch (const zmq::error_t& error) {
        known = error.num() != EHOSTUNREACH;
      }
      if (!known) {
        clients_gone_->increment();
        in_flight_->add(-1);
        if (deferral.client_gone) gone.push_back(std::move(deferral.client_gone));
        deferred_.erase(found);
        suspect = suspects_.erase(suspect);
        continue;
      }
      if (--deferral.probes_left > 0) {
        deferral.probe_at = now + kProbeInterval;
        next = next ? std::min(*next, deferral.probe_at) : deferral.probe_at;
        ++suspect;
      } else {
        suspect = suspects_.erase(suspect);  // alive: the descriptor was another connection's by now
      }
    }
    deferred_count_->set(static_cast<double>(deferred_.size()));
  }
  for (auto& tell : gone) tell();  // outside the lock: they may send replies
  return next;
}

void Service::run_io() {
  // poll(2) on the router's descriptor, not zmq_poll, which makes a
  // system call more before every wait.
  pollfd waits[] = {
      {router_.get(zmq::sockopt::fd), POLLIN, 0}, {wake_fd_, POLLIN, 0}, {monitor_.get(zmq::sockopt::fd), POLLIN, 0}};
  Clock::time_point last_reply{};
  std::optional<Clock::time_point> next_probe;
  while (true) {
    read_disconnects();  // its descriptor, too, only signals a change
    next_probe = probe_suspects(router_);
    // The descriptor only signals that the socket's state may have changed,
    // and a send may have taken that signal: sleep only when the socket has
    // nothing to read.
    bool readable = false;
    try {
      readable = router_.get(zmq::sockopt::events) & ZMQ_POLLIN;
    } catch (const zmq::error_t& error) {
      if (error.num() == EINTR) continue;
      break;
    }
    if (!readable) {
      int timeout_ms = -1;
      if (next_probe) {
        timeout_ms = static_cast<int>(
            std::max<int64_t>(1, std::chrono::ceil<std::chrono::milliseconds>(*next_probe - Clock::now()).count()));
      }
      if (::poll(waits, 3, timeout_ms) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (waits[1].revents & POLLIN) {
        eventfd_t ignored;
        [[maybe_unused]] const int read = ::eventfd_read(wake_fd_, &ignored);
      }
      readable = waits[0].revents & POLLIN;
    }
    // Read before sending: once it is set, every worker has queued its last reply.
    const bool last_round = io_stop_;
    if (readable) receive_requests(router_);
    // From workers and from dispatch (ping, rejections).
    if (send_replies(router_)) last_reply = Clock::now();
    if (last_round) {
      // A client that has a reply in its socket but has not read it yet loses
      // it when the connection closes (its DEALER connects with
      // ZMQ_IMMEDIATE): give the last replies time to be read.
      std::this_thread::sleep_until(last_reply + kLastReplyGrace);
      break;
    }
  }
  monitor_.close();
  router_.close();
}

void Service::receive_requests(zmq::socket_t& router) {
  for (size_t n = 0; n < kMaxMessagesPerWakeup; ++n) {
    transport::Frames message;
    zmq::message_t part;
    if (!router.recv(part, zmq::recv_flags::dontwait)) return;
    const Clock::time_point received = Clock::now();
    bool more = part.more();
    message.push_back(std::move(part));
    // The rest of a multipart message has arrived with its first part.
    while (more) {
      zmq::message_t next;
      (void)router.recv(next, zmq::recv_flags::none);
      more = next.more();
      message.push_back(std::move(next));
    }
    try {
      dispatch(std::move(message), received);
    } catch (const std::exception&) {
      dropped_messages_->increment();  // e.g. no memory for a reply: the loop must survive
    }
  }
}

// Runs on the I/O thread: everything that needs no handler is answered here.
void Service::dispatch(transport::Frames message, Clock::time_point received) {
  // [routing id, envelope, args...]; without an envelope there is nothing
  // to answer to.
  if (message.size() < 2) {
    dropped_messages_->increment();
    return;
  }
  auto answer_now = [&](transport::Frames reply, std::function<void()> undelivered = nullptr) {
    std::lock_guard lock(replies_mutex_);
    replies_.push_back(Reply{std::move(reply), std::move(undelivered)});
  };
  transport::RequestEnvelope envelope;
  try {
    envelope = transport::decode_request_envelope(message[1]);
  } catch (const Error& error) {
    rejected_malformed_->increment();
    answer_now(error_reply(std::move(message[0]), transport::request_id_or_zero(message[1]),
                           ErrorCode::kInvalidArgument, std::string("malformed request: ") + error.what()));
    return;
  }
  size_t request_bytes = 0;
  for (size_t i = 1; i < message.size(); ++i) request_bytes += message[i].size();
  if (request_bytes > options_.max_request_bytes) {
    rejected_too_large_->increment();
    answer_now(error_reply(std::move(message[0]), envelope.id, ErrorCode::kInvalidArgument,
                           "request '" + envelope.op + "' is " + std::to_string(request_bytes) +
                               " bytes, over max_request_bytes = " + std::to_string(options_.max_request_bytes)));
    return;
  }
  const auto found = routes_.find(envelope.op);
  if (found == routes_.end()) {
    rejected_unknown_op_->increment();
    std::string known;
    for (const auto& [op, route] : routes_) known += (known.empty() ? "" : ", ") + op;
    answer_now(error_reply(std::move(message[0]), envelope.id, ErrorCode::kNotFound,
                           "unknown operation '" + envelope.op + "'; this service handles: " + known));
    return;
  }
  const Route& route = *found->second;
  // Without CURVE there is no identity to check.
  if (route.services_only && options_.security.enabled && !from_a_service(message[1])) {
    rejected_permission_->increment();
    answer_now(error_reply(
        std::move(message[0]), envelope.id, ErrorCode::kPermissionDenied,
        "operation '" + route.op + "' is the services' own: only the cluster's key may call it, not a client key"));
    return;
  }
  Job job;
  job.routing_id = std::move(message[0]);
  job.id = envelope.id;
  job.route = &route;
  job.received = received;
  if (envelope.budget_ms != 0) job.deadline = received + std::chrono::milliseconds(envelope.budget_ms);
  job.source_fd = zmq_msg_get(message[1].handle(), ZMQ_SRCFD);
  job.args.reserve(message.size() - 2);
  for (size_t i = 2; i < message.size(); ++i) job.args.push_back(std::move(message[i]));
  if (route.try_inline) {
    bool failed = false;
    const DeadlineScope scope(job.deadline);
    Call call{this, &job, true, 0, nullptr};
    current_call_ = &call;
    // The routing id is still needed if the handler defers: reply_of takes a copy.
    zmq::message_t routing_id = copy_message(job.routing_id);
    std::optional<transport::Frames> reply = reply_of(
        route.op, routing_id, job.id, [&] { return route.try_inline(std::as_const(job.args)); }, failed);
    current_call_ = nullptr;
    if (call.deferral != 0) {
      if (reply) {
        // It deferred and then threw: the error is the reply.
        forget_deferred(call.deferral);
        route.requests->increment();
        route.errors->increment();
        answer_now(std::move(*reply));
      }
      return;
    }
    if (!reply && !route.handler) {
      reply = error_reply(std::move(routing_id), job.id, ErrorCode::kInternal,
                          "operation '" + route.op + "' declined a request and has no worker handler");
      failed = true;
    }
    if (reply) {
      route.requests->increment();
      if (failed) route.errors->increment();
      route.latency->observe(seconds_since(received));
      answer_now(std::move(*reply), failed ? nullptr : std::move(call.undelivered));
      return;
    }
  }
  {
    std::lock_guard lock(jobs_mutex_);
    if (stopping_) return;
    in_flight_->add(1);
    jobs_.push_back(std::move(job));
    // Handlers may block for long: a request that finds no idle worker gets
    // a new one, so blocked handlers hold nothing back below the cap.
    if (jobs_.size() > idle_workers_ && workers_.size() < options_.max_workers) {
      try {
        workers_.emplace_back(&Service::run_worker, this);
        worker_count_->set(static_cast<double>(workers_.size()));
      } catch (const std::system_error&) {
        // Out of threads: the job waits for a running worker instead.
      }
    }
  }
  jobs_ready_.notify_one();
}

bool Service::send_replies(zmq::socket_t& router) {
  std::vector<Reply> replies;
  {
    std::lock_guard lock(replies_mutex_);
    replies.swap(replies_);
  }
  for (Reply& reply : replies) {
    try {
      // Never blocks: a reply to a peer that is gone (EHOSTUNREACH, the
      // router being mandatory) or full (EAGAIN) fails on its first frame.
      for (size_t i = 0; i < reply.frames.size(); ++i) {
        const auto flags = i + 1 < reply.frames.size() ? zmq::send_flags::sndmore | zmq::send_flags::dontwait
                                                       : zmq::send_flags::dontwait;
        if (!router.send(reply.frames[i], flags)) throw zmq::error_t();
      }
    } catch (const zmq::error_t&) {
      dropped_messages_->increment();
      run_undelivered(reply.undelivered);
    }
  }
  return !replies.empty();
}

void Service::run_worker() {
  std::unique_lock lock(jobs_mutex_);
  while (true) {
    ++idle_workers_;
    jobs_ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    --idle_workers_;
    if (stopping_) return;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();

    if (job.deadline && Clock::now() > *job.deadline) {
      job.route->expired->increment();
      finish(job,
             error_reply(std::move(job.routing_id), job.id, ErrorCode::kTimeout,
                         "request '" + job.route->op + "' not run: its client's deadline passed after " +
                             milliseconds_since(job.received) + " in the service's queue"),
             true, nullptr);
      lock.lock();
      continue;
    }
    const DeadlineScope scope(job.deadline);
    bool failed = false;
    Call call{this, &job, false, 0, nullptr};
    current_call_ = &call;
    std::optional<transport::Frames> reply = reply_of(
        job.route->op, job.routing_id, job.id,
        [&] { return std::optional<transport::Frames>(job.route->handler(job.args)); }, failed);
    current_call_ = nullptr;
    finish(job, std::move(*reply), failed, failed ? nullptr : std::move(call.undelivered));
    lock.lock();
  }
}

void Service::finish(Job& job, transport::Frames reply, bool failed, std::function<void()> undelivered) {
  job.route->requests->increment();
  if (failed) job.route->errors->increment();
  job.route->latency->observe(seconds_since(job.received));
  in_flight_->add(-1);
  queue_reply(std::move(reply), std::move(undelivered));
}

}  // namespace seqflow::server
