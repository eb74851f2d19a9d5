// A request/reply service on one ZeroMQ ROUTER socket: an I/O thread owns
// the socket, an elastic pool of workers runs the handlers.
//
//   client DEALER --[envelope, args...]--> ROUTER (I/O thread) --queue--> worker: handler(args)
//   client DEALER <-[envelope, results..]- ROUTER (I/O thread) <-queue--- worker
//
// Requests and replies cross threads through mutex-protected queues (an
// eventfd wakes the I/O thread), not through inproc sockets, so that
// ThreadSanitizer sees every hand-over. Short requests skip both hand-overs:
// an operation may have an InlineHandler that the I/O thread tries first.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transport/frames.h"
#include "server/metrics.h"
#include "seqflow/error.h"
#include "transport/security.h"

namespace seqflow::server {

struct ServiceOptions {
  std::string bind = "tcp://127.0.0.1:0";  // port 0: a free port; endpoint() tells which
  size_t min_workers = 2;
  size_t max_workers = 64;
  // A larger request (all frames) gets an error reply (kInvalidArgument).
  // ZeroMQ itself disconnects a peer whose single frame exceeds this by more
  // than kMaxMessageSlackBytes, before reading it all.
  size_t max_request_bytes = size_t{8} << 30;
  transport::ServerSecurity security;
};

// Handlers run on worker threads, several at once. The result frames are
// the reply; a thrown seqflow::Error keeps its code, anything else becomes
// kInternal. A request whose client gave up before a worker took it is not
// run (its client would discard the reply; seqflow_requests_expired_total).
using Handler = std::function<transport::Frames(transport::Frames& args)>;

// Runs on the I/O thread, before any worker sees the request, and saves the
// two thread hand-overs that dominate a short request's round trip. It must
// finish in microseconds and never wait (no I/O, no lock held for long);
// nullopt passes the request, untouched, to the Handler on a worker.
using InlineHandler = std::function<std::optional<transport::Frames>(const transport::Frames& args)>;

inline constexpr size_t kMaxMessageSlackBytes = size_t{1} << 20;

// Throws kInvalidArgument naming `bind` when its TCP port is outside
// 0..65535 (ZeroMQ would take it modulo 65536: -5 binds 65531).
void check_bind_address(const std::string& bind);

// The deadline of the request the calling thread handles: its arrival plus
// the budget its client sent (transport/envelope.h); nullopt when it sent
// none, or outside a handler. A handler that waits must not wait past it.
std::optional<std::chrono::steady_clock::time_point> request_deadline();
// Throws kTimeout naming `what` once the request's client has given up:
// for a handler that waited (for a lock, say) before it changes anything.
void check_request_open(std::string_view what);

class Service;

// The reply to a request whose InlineHandler deferred it (defer_reply()):
// sent later, from any thread, once. Destroyed unsent, the request ends
// without a reply (its client times out); a reply sent after the service
// stopped goes nowhere. It must not outlive its Service object.
class DeferredReply {
 public:
  DeferredReply() = default;
  DeferredReply(DeferredReply&& other) noexcept;
  DeferredReply& operator=(DeferredReply&& other) noexcept;
  ~DeferredReply();

  explicit operator bool() const { return service_ != nullptr; }
  // `results` as the reply. `undelivered` runs if it cannot reach the
  // client (gone, or its queue full), on the service's I/O thread or, when
  // the client is known to be gone already, here: nobody received it.
  void send(transport::Frames results, std::function<void()> undelivered = nullptr);
  void fail(ErrorCode code, const std::string& message);

 private:
  friend class Service;
  friend DeferredReply defer_reply(std::function<void()> client_gone);
  DeferredReply(Service* service, uint64_t id) : service_(service), id_(id) {}
  Service* service_ = nullptr;
  uint64_t id_ = 0;
};

// Inside an InlineHandler: its request is answered later through the
// returned DeferredReply; the handler then returns nullopt and no worker
// runs the request. `client_gone` runs on the I/O thread when the client's
// connection closes first (a send after that goes nowhere); it must not
// block. Throws kInternal outside an InlineHandler.
DeferredReply defer_reply(std::function<void()> client_gone);
// Inside a handler (inline or on a worker): `undelivered` runs on the I/O
// thread if the reply cannot reach the client.
void on_undelivered(std::function<void()> undelivered);

class Service {
 public:
  explicit Service(ServiceOptions options);  // throws kInvalidArgument on bad options
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Before start(). At least one of the two handlers; an operation with
  // only an InlineHandler must never decline. "ping" is built in: an inline
  // reply with no frames, so it answers even when every worker is busy.
  void handle(std::string_view op, Handler handler, InlineHandler try_inline = nullptr);
  // An operation that only the cluster's services may call (a storage unit
  // registering, say). With CURVE, a request from a key the ZAP handler
  // admitted as a client gets kPermissionDenied naming the operation before
  // any handler runs; without CURVE there is no identity to check and it is
  // served like any other.
  void handle_services_only(std::string_view op, Handler handler, InlineHandler try_inline = nullptr);
  // The operations with a handler, sorted ("ping" among them): what a
  // protocol's op list is checked against.
  std::vector<std::string> ops() const;

  // Binds (throws kInvalidArgument naming the address on failure) and starts
  // the threads. Once only.
  void start();

  // Idempotent; also in the destructor. Stops taking requests, lets running
  // handlers finish and sends their replies, drops queued requests that no
  // worker has started (their clients time out), joins every thread. Not
  // from inside a handler (it joins the workers).
  void stop();

  std::string endpoint() const;  // the bound address, e.g. tcp://127.0.0.1:40123
  MetricsRegistry& metrics() { return metrics_; }

 private:
  friend class DeferredReply;
  friend DeferredReply defer_reply(std::function<void()> client_gone);
  friend void on_undelivered(std::function<void()> undelivered);
  struct Route;
  struct Job;
  struct Reply;
  struct Deferral;
  struct Call;
  using Clock = std::chrono::steady_clock;
  static thread_local Call* current_call_;  // the handler call on this thread

  void add_route(std::string op, Handler handler, InlineHandler try_inline, bool services_only);
  void open_router();
  void run_io();
  void receive_requests(zmq::socket_t& router);
  void dispatch(transport::Frames message, std::chrono::steady_clock::time_point received);
  bool send_replies(zmq::socket_t& router);  // true: it sent at least one
  void run_worker();
  void finish(Job& job, transport::Frames reply, bool failed, std::function<void()> undelivered);
  // Queues a reply for the I/O thread; once stopped, runs `undelivered`.
  void queue_reply(transport::Frames reply, std::function<void()> undelivered);
  void run_undelivered(const std::function<void()>& undelivered);
  void wake_io();

  // Deferred replies (DeferredReply).
  uint64_t defer(Job& job, std::function<void()> client_gone);
  void send_deferred(uint64_t id, std::optional<transport::Frames> results, ErrorCode code, const std::string& message,
                     std::function<void()> undelivered);
  void forget_deferred(uint64_t id);
  void open_monitor();
  void read_disconnects();  // marks deferrals from a closed connection's descriptor for a probe
  // Probes the marked deferrals' clients; those gone are forgotten and told.
  // Returns when to probe next (nullopt: nothing marked).
  std::optional<Clock::time_point> probe_suspects(zmq::socket_t& router);

  ServiceOptions options_;
  MetricsRegistry metrics_;
  std::unordered_map<std::string, std::unique_ptr<Route>> routes_;  // fixed once started

  // Own context: a ZAP handler is per context, and stopping this service
  // (context termination included) cannot disturb any other socket.
  zmq::context_t context_;
  std::unique_ptr<transport::ZapHandler> zap_handler_;
  zmq::socket_t router_;  // owned by the I/O thread once started
  std::string endpoint_;
  int wake_fd_ = -1;  // eventfd: workers and stop() wake the I/O thread
  std::thread io_thread_;
  bool started_ = false;
  bool stopped_ = false;
  std::atomic<bool> io_stop_{false};

  // Request queue and worker pool.
  std::mutex jobs_mutex_;
  std::condition_variable jobs_ready_;
  std::deque<Job> jobs_;
  std::vector<std::thread> workers_;
  size_t idle_workers_ = 0;
  bool stopping_ = false;

  // Replies waiting for the I/O thread.
  std::mutex replies_mutex_;
  std::vector<Reply> replies_;
  bool replies_closed_ = false;  // stopped: nothing more is queued

  // Requests answered later, by deferral id.
  std::mutex deferred_mutex_;
  std::unordered_map<uint64_t, Deferral> deferred_;
  std::set<uint64_t> suspects_;  // deferrals from a connection that closed, or one reusing its descriptor
  // When each descriptor last closed (one entry per descriptor number): a
  // request read after its connection's disconnect event is probed too.
  std::unordered_map<int, Clock::time_point> disconnected_at_;
  uint64_t next_deferral_ = 1;
  zmq::socket_t monitor_;  // the router's disconnect events; the I/O thread's

  Counter* dropped_messages_ = nullptr;
  Counter* rejected_unknown_op_ = nullptr;
  Counter* rejected_malformed_ = nullptr;
  Counter* rejected_too_large_ = nullptr;
  Counter* rejected_permission_ = nullptr;
  Gauge* in_flight_ = nullptr;
  Gauge* deferred_count_ = nullptr;
  Counter* clients_gone_ = nullptr;
  Gauge* worker_count_ = nullptr;
};

}  // namespace seqflow::server
