#include "transport/connection.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <thread>

#include "transport/envelope.h"
#include "transport/zmq_message_memory.h"
#include "seqflow/error.h"

namespace seqflow::transport {
namespace {

constexpr int kReconnectMs = 100;      // a restarted service is picked up quickly...
constexpr int kReconnectMaxMs = 1000;  // ...and a dead one is not hammered
// ZeroMQ heartbeats notice a peer that vanished without closing TCP (a
// machine that died): the socket then reconnects instead of queueing into it.
constexpr int kHeartbeatMs = 2000;
constexpr int kHeartbeatTimeoutMs = 6000;
// Requests sent and never received (a caller that gave up without calling
// receive) are forgotten beyond this many, oldest first.
constexpr size_t kMaxPending = 4096;

constexpr int kMonitoredEvents = ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED;

// A name for each connection's monitor endpoint in the process.
std::string monitor_endpoint() {
  static std::atomic<uint64_t> next{0};
  return "inproc://seqflow-curve-monitor-" + std::to_string(next.fetch_add(1));
}

std::string milliseconds_text(Connection::Clock::duration duration) {
  return std::to_string(std::chrono::round<std::chrono::milliseconds>(duration).count()) + " ms";
}

// The rest of a multipart message whose first part is `first`: it arrived
// with it.
Frames rest_of_message(zmq::socket_t& socket, zmq::message_t first) {
  Frames message;
  bool more = first.more();
  message.push_back(std::move(first));
  while (more) {
    zmq::message_t next;
    (void)socket.recv(next, zmq::recv_flags::none);
    more = next.more();
    message.push_back(std::move(next));
  }
  return message;
}

// One of the process's receives now waiting for a reply. Spinning pays only
// while the waiting ones leave a core free for the threads that carry the
// replies (busy_poll_spinner_limit); on a saturated machine it is waste.
class WaitingReceive {
 public:
  WaitingReceive() {
    // A child forked while other threads waited has none of them.
    [[maybe_unused]] static const int reset_in_child = pthread_atfork(nullptr, nullptr, [] { waiting_ = 0; });
    waiting_.fetch_add(1);
  }
  WaitingReceive(const WaitingReceive&) = delete;
  WaitingReceive& operator=(const WaitingReceive&) = delete;
  ~WaitingReceive() { waiting_.fetch_sub(1); }
  static bool leave_a_core_free() { return waiting_.load(std::memory_order_relaxed) <= busy_poll_spinner_limit(); }

 private:
  static inline std::atomic<unsigned> waiting_{0};
};

// Only the receiving thread writes a connection's counts: no locked
// read-modify-write on the receive path.
void count_one(std::atomic<uint64_t>& counter) {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// libzmq's allocations are redirected before its first socket starts its threads (see zmq_message_memory.h).
zmq::socket_t dealer_socket(zmq::context_t& context) {
  keep_large_zmq_messages_in_block_cache();  // a large reply lands in reused, huge-page memory
  return zmq::socket_t(context, zmq::socket_type::dealer);
}

}  // namespace

unsigned busy_poll_spinner_limit() {
  static const unsigned cores = std::thread::hardware_concurrency();
  return cores > 2 ? cores - 1 : 1;
}

void check_busy_poll(std::chrono::microseconds busy_poll, std::string_view what) {
  constexpr std::chrono::microseconds kMax = std::chrono::seconds(1);  // beyond: a sleep is cheaper
  if (busy_poll.count() < 0 || busy_poll > kMax) {
    throw_invalid(std::string(what) + " must be between 0 and " + std::to_string(kMax.count()) + " us, got " +
                  std::to_string(busy_poll.count()));
  }
}

Connection::Connection(zmq::context_t& context, std::string endpoint, ConnectionOptions options)
    : endpoint_(std::move(endpoint)), options_(std::move(options)), socket_(dealer_socket(context)) {
  if (options_.timeout.count() <= 0) {
    throw_invalid("ConnectionOptions.timeout must be > 0 ms, got " + std::to_string(options_.timeout.count()));
  }
  check_busy_poll(options_.busy_poll, "ConnectionOptions.busy_poll");
  const ClientSecurity& security = options_.security;
  if (security.enabled) {
    check_curve_key(security.server_public_key, "ConnectionOptions.security.server_public_key");
    check_curve_key(security.client_keys.public_key, "ConnectionOptions.security.client_keys.public_key");
    check_curve_key(security.client_keys.secret_key, "ConnectionOptions.security.client_keys.secret_key");
  }
  try {
    socket_.set(zmq::sockopt::linger, 0);
    // Queue nothing for a peer that is not connected: a send to a service that
    // is down then waits for POLLOUT (bounded by the deadline), instead of
    // sitting in a queue and being delivered to a later incarnation.
    socket_.set(zmq::sockopt::immediate, true);
    socket_.set(zmq::sockopt::reconnect_ivl, kReconnectMs);
    socket_.set(zmq::sockopt::reconnect_ivl_max, kReconnectMaxMs);
    socket_.set(zmq::sockopt::heartbeat_ivl, kHeartbeatMs);
    socket_.set(zmq::sockopt::heartbeat_timeout, kHeartbeatTimeoutMs);
    if (security.enabled) {
      socket_.set(zmq::sockopt::curve_serverkey, security.server_public_key);
      socket_.set(zmq::sockopt::curve_publickey, security.client_keys.public_key);
      socket_.set(zmq::sockopt::curve_secretkey, security.client_keys.secret_key);
    }
  } catch (const zmq::error_t& error) {
    throw Error(ErrorCode::kInternal, "connection to '" + endpoint_ + "' cannot set up its socket: " + error.what());
  }
  if (security.enabled) {
    // Before the connect: no handshake goes unseen. The monitor's queue has
    // no limit (rcvhwm 0 on this end): events of a connection that is never
    // called again pile up (one per reconnect), and a full queue would stall
    // ZeroMQ's I/O thread. ZeroMQ does not retry a refused handshake.
    try {
      const std::string monitor = monitor_endpoint();
      if (zmq_socket_monitor(socket_.handle(), monitor.c_str(), kMonitoredEvents) != 0) throw zmq::error_t();
      monitor_ = zmq::socket_t(context, zmq::socket_type::pair);
      monitor_.set(zmq::sockopt::linger, 0);
      monitor_.set(zmq::sockopt::rcvhwm, 0);
      monitor_.connect(monitor);
    } catch (const zmq::error_t& error) {
      throw Error(ErrorCode::kInternal, "connection to '" + endpoint_ + "' cannot monitor its socket: " + error.what());
    }
  }
  try {
    socket_.connect(endpoint_);
  } catch (const zmq::error_t& error) {
    throw_invalid("cannot connect to endpoint '" + endpoint_ + "': " + error.what());
  }
}

// A monitor event is [u16 event, u32 value][endpoint].
bool Connection::key_refused() {
  if (!monitor_) return false;
  while (true) {
    zmq::message_t event;
    if (!monitor_.recv(event, zmq::recv_flags::dontwait)) return refused_;
    const bool more = event.more();
    if (event.size() >= sizeof(uint16_t)) {
      uint16_t code = 0;
      std::memcpy(&code, event.data(), sizeof code);
      if (code == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) refused_ = true;
      if (code == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) refused_ = false;
    }
    if (more) (void)rest_of_message(monitor_, zmq::message_t());
  }
}

void Connection::throw_key_refused(std::string_view op) {
  throw Error(ErrorCode::kPermissionDenied,
              endpoint_ +
                  " refused this client's CURVE key (ZAP authentication failed: the key is not in the service's "
                  "allow-list); request '" +
                  std::string(op) + "' was not served");
}

bool Connection::poll_until(short events, Clock::time_point deadline) {
  zmq::pollitem_t items[] = {{socket_.handle(), 0, events, 0}, {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
  const int count = monitor_ ? 2 : 1;
  while (true) {
    // ZeroMQ does not retry a handshake that failed authentication: once
    // refused, nothing wakes the poll.
    if (monitor_ && key_refused()) return false;  // the caller names the refusal
    const auto remaining = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      zmq::poll(items, count, std::max(remaining, std::chrono::milliseconds(0)));
    } catch (const zmq::error_t& error) {
      if (error.num() != EINTR) throw Error(ErrorCode::kInternal, "polling " + endpoint_ + " failed: " + error.what());
      continue;
    }
    if (items[0].revents & events) return true;
    if (Clock::now() >= deadline) return false;
  }
}

Frames Connection::receive_until(Clock::time_point deadline) {
  zmq::message_t first;
  // `flags` dontwait: the spin; none: waits up to rcvtimeo. False: nothing came.
  const auto receive_first = [&](zmq::recv_flags flags) {
    try {
      return socket_.recv(first, flags).has_value();
    } catch (const zmq::error_t& error) {
      if (error.num() != EINTR) {
        throw Error(ErrorCode::kInternal, "receiving from " + endpoint_ + " failed: " + error.what());
      }
      return false;
    }
  };
  const WaitingReceive waiting;
  const Clock::time_point started = Clock::now();
  const auto arrived = [&] {
    last_wait_ = Clock::now() - started;
    return rest_of_message(socket_, std::move(first));
  };
  // Spins only while it pays: not when the last reply took longer than the
  // spin (a long request, a slow peer), nor while the process waits on as
  // many calls as there are cores but one.
  if (last_wait_ < options_.busy_poll) {
    const Clock::time_point spin_until = std::min(deadline, started + options_.busy_poll);
    for (bool first_poll = true;; first_poll = false) {
      if (!WaitingReceive::leave_a_core_free()) {
        count_one(counts_.spins_withheld_for_other_waiters);
        break;
      }
      if (Clock::now() >= spin_until) break;
      if (first_poll) count_one(counts_.spun);
      if (receive_first(zmq::recv_flags::dontwait)) return arrived();
      std::this_thread::yield();  // the threads that carry the reply may need this CPU
    }
  } else if (options_.busy_poll.count() > 0) {
    count_one(counts_.spins_skipped_after_a_slow_reply);
  }
  count_one(counts_.slept);
  // With CURVE the wait polls the monitor beside the socket: a refused key
  // ends it at once (an empty result with refused_ set).
  while (monitor_) {
    if (key_refused()) return {};
    const bool readable = poll_until(ZMQ_POLLIN, deadline);
    if (readable && receive_first(zmq::recv_flags::dontwait)) return arrived();
    if (!readable && (refused_ || Clock::now() >= deadline)) {
      last_wait_ = Clock::now() - started;
      return {};
    }
  }
  while (true) {
    // 0 once the deadline has passed: a reply that is already there is still taken.
    const auto remaining =
        std::max(std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()), std::chrono::milliseconds(0));
    // A blocking receive waits in one system call; a zmq_poll before a
    // receive costs five (a tenth of a short request's round trip).
    socket_.set(zmq::sockopt::rcvtimeo,
                static_cast<int>(std::min<int64_t>(remaining.count(), std::numeric_limits<int>::max())));
    if (receive_first(zmq::recv_flags::none)) return arrived();
    if (Clock::now() >= deadline) {
      last_wait_ = Clock::now() - started;
      return {};
    }
  }
}

uint64_t Connection::send(std::string_view op, Frames args) {
  return send(op, std::move(args), Clock::now() + options_.timeout);
}

uint64_t Connection::send(std::string_view op, Frames args, Clock::time_point deadline) {
  const Clock::time_point started = Clock::now();
  const uint64_t id = next_id_++;
  // The budget tells the service when this client gives up (at least 1 ms).
  const auto budget = std::chrono::ceil<std::chrono::milliseconds>(deadline - started).count();
  const auto budget_ms = static_cast<uint32_t>(std::clamp<int64_t>(budget, 1, std::numeric_limits<uint32_t>::max()));
  zmq::message_t envelope = encode_request_envelope(id, op, budget_ms);  // checks the op name
  const auto first_flags =
      args.empty() ? zmq::send_flags::dontwait : zmq::send_flags::sndmore | zmq::send_flags::dontwait;
  // Polls only when the socket cannot take the message now: a poll costs a
  // system call on every request.
  while (!socket_.send(envelope, first_flags)) {
    if (!poll_until(ZMQ_POLLOUT, deadline)) {
      if (key_refused()) throw_key_refused(op);
      throw Error(ErrorCode::kTimeout, "request '" + std::string(op) + "' to " + endpoint_ +
                                           " could not be sent within " + milliseconds_text(deadline - started) +
                                           ": the service is not reachable or not taking requests");
    }
  }
  // Once the first part is in, ZeroMQ takes the rest of the message.
  for (size_t i = 0; i < args.size(); ++i) {
    const auto flags =
        i + 1 < args.size() ? zmq::send_flags::sndmore | zmq::send_flags::dontwait : zmq::send_flags::dontwait;
    if (!socket_.send(args[i], flags)) {
      throw Error(ErrorCode::kInternal, "request '" + std::string(op) + "' to " + endpoint_ + ": frame " +
                                            std::to_string(i) + " was refused mid-message");
    }
  }
  if (pending_.size() >= kMaxPending) {
    early_replies_.erase(pending_.begin()->first);
    pending_.erase(pending_.begin());
  }
  pending_.emplace(id, Pending{std::string(op), started});
  return id;
}

void Connection::throw_no_reply(uint64_t id, Clock::time_point deadline) {
  const auto pending = pending_.find(id);
  const std::string op = pending->second.op;
  const auto waited = deadline - pending->second.sent;
  pending_.erase(pending);  // its reply, if it ever comes, is now stale
  throw Error(ErrorCode::kTimeout,
              "request '" + op + "' to " + endpoint_ + " got no reply within " + milliseconds_text(waited));
}

Frames Connection::receive(uint64_t id, Clock::time_point deadline) {
  const auto pending = pending_.find(id);
  if (pending == pending_.end()) {
    throw_invalid("Connection::receive: request id " + std::to_string(id) + " to " + endpoint_ +
                  " is not awaiting a reply (never sent, already received or timed out)");
  }
  const std::string op = pending->second.op;
  Frames reply;
  if (auto early = early_replies_.find(id); early != early_replies_.end()) {
    reply = std::move(early->second);
    early_replies_.erase(early);
  }
  while (reply.empty()) {
    Frames message = receive_until(deadline);
    if (message.empty()) {
      if (key_refused()) {
        pending_.erase(id);
        throw_key_refused(op);
      }
      throw_no_reply(id, deadline);
    }
    const uint64_t reply_id = request_id_or_zero(message[0]);
    if (reply_id == id) {
      reply = std::move(message);
    } else if (reply_id != 0 && pending_.count(reply_id) > 0) {
      early_replies_[reply_id] = std::move(message);  // pipelined: its receive() comes later
    }
    // Anything else answers a request that timed out: stale, dropped.
  }
  pending_.erase(id);

  ReplyEnvelope envelope;
  try {
    envelope = decode_reply_envelope(reply[0]);
  } catch (const Error& error) {
    throw Error(ErrorCode::kInternal, "malformed reply to '" + op + "' from " + endpoint_ + ": " + error.what());
  }
  Frames results;
  results.reserve(reply.size() - 1);
  for (size_t i = 1; i < reply.size(); ++i) results.push_back(std::move(reply[i]));
  if (envelope.error) {
    if (results.size() != 1) {
      throw Error(ErrorCode::kInternal, "error reply to '" + op + "' from " + endpoint_ + " carries " +
                                            std::to_string(results.size()) + " frames instead of one message");
    }
    throw Error(*envelope.error, std::string(as_string_view(results[0])));
  }
  return results;
}

ReceiveCounts Connection::receive_counts() const {
  constexpr auto relaxed = std::memory_order_relaxed;
  return {counts_.spun.load(relaxed), counts_.slept.load(relaxed),
          counts_.spins_skipped_after_a_slow_reply.load(relaxed),
          counts_.spins_withheld_for_other_waiters.load(relaxed)};
}

Frames Connection::call(std::string_view op, Frames args) { return call(op, std::move(args), options_.timeout); }

Frames Connection::call(std::string_view op, Frames args, std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  const uint64_t id = send(op, std::move(args), deadline);
  return receive(id, deadline);
}

}  // namespace seqflow::transport
