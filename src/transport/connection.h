// The client side: a Connection is one DEALER socket to one service; a
// ConnectionPool shares persistent connections between threads.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "transport/frames.h"
#include "transport/security.h"

namespace seqflow::transport {

struct ConnectionOptions {
  std::chrono::milliseconds timeout{30000};  // per call: sending and waiting for the reply
  // A receive polls without sleeping for up to this long before it blocks:
  // on a VM, waking a thread whose vCPU went idle costs 20-40 us, a third of
  // a short call's round trip. The CPU it burns is bounded by it per call.
  std::chrono::microseconds busy_poll{0};
  ClientSecurity security;
};

// Throws kInvalidArgument naming `what` unless 0 <= busy_poll <= 1 s.
void check_busy_poll(std::chrono::microseconds busy_poll, std::string_view what);
// A receive spins only while at most this many receives of the process
// wait for replies: all cores but one (at least 1).
unsigned busy_poll_spinner_limit();

// What a connection's receives did while waiting for a message: how tests
// observe busy polling without measuring time.
struct ReceiveCounts {
  uint64_t spun = 0;   // polled without blocking at least once
  uint64_t slept = 0;  // waited in a blocking receive (after a spin or not)
  // Did not spin: the previous wait took at least busy_poll.
  uint64_t spins_skipped_after_a_slow_reply = 0;
  // Did not spin, or stopped spinning, because more receives of the process
  // waited than busy_poll_spinner_limit().
  uint64_t spins_withheld_for_other_waiters = 0;
  bool operator==(const ReceiveCounts&) const = default;
};

// Not thread-safe: one thread at a time (ConnectionPool hands them out).
// Requests may be pipelined: several send() before their receive().
class Connection {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects lazily (ZeroMQ reconnects by itself, also to a restarted
  // service). Throws kInvalidArgument on a bad endpoint or bad keys.
  Connection(zmq::context_t& context, std::string endpoint, ConnectionOptions options);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends [envelope, args...] and returns the request id. Throws kTimeout
  // when the service cannot take the request within options.timeout (it is
  // down, or its queue is full): a send never blocks forever.
  uint64_t send(std::string_view op, Frames args);
  uint64_t send(std::string_view op, Frames args, Clock::time_point deadline);

  // The result frames of request `id`. An error reply throws seqflow::Error
  // with the service's code and message; no reply by the deadline throws
  // kTimeout, and a late reply is discarded when it comes.
  //
  // With CURVE, a service whose ZAP handler refuses this client's key makes
  // send and receive throw kPermissionDenied naming the endpoint and the
  // authentication as soon as the handshake fails (a socket monitor reports
  // it), instead of kTimeout at the deadline. Without CURVE there is no
  // monitor and no cost.
  Frames receive(uint64_t id, Clock::time_point deadline);

  Frames call(std::string_view op, Frames args);  // send + receive within options.timeout
  Frames call(std::string_view op, Frames args, std::chrono::milliseconds timeout);

  const std::string& endpoint() const { return endpoint_; }
  const ConnectionOptions& options() const { return options_; }
  // Any thread may read them, also while a receive runs.
  ReceiveCounts receive_counts() const;

 private:
  struct Pending {
    std::string op;
    Clock::time_point sent;
  };
  bool poll_until(short events, Clock::time_point deadline);  // false: deadline passed
  // With CURVE: reads the handshake events the monitor holds; true while the
  // last one says the service refused this client's key.
  bool key_refused();
  [[noreturn]] void throw_key_refused(std::string_view op);
  Frames receive_until(Clock::time_point deadline);  // the next message; empty: deadline passed
  [[noreturn]] void throw_no_reply(uint64_t id, Clock::time_point deadline);

  std::string endpoint_;
  ConnectionOptions options_;
  zmq::socket_t socket_;
  // With CURVE only: the PAIR end of socket_'s monitor (handshake failures
  // and successes), polled beside it.
  zmq::socket_t monitor_;
  bool refused_ = false;                      // the last handshake event was ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
  uint64_t next_id_ = 1;                      // 0 is what the service answers to an envelope without an id
  std::map<uint64_t, Pending> pending_;       // sent, not yet received
  std::map<uint64_t, Frames> early_replies_;  // pipelined replies that came before their turn
  Clock::duration last_wait_{0};              // the last receive's wait for a message: spin next time?
  // Atomic for the readers of receive_counts(); only the receiving thread writes.
  struct AtomicReceiveCounts {
    std::atomic<uint64_t> spun{0};
    std::atomic<uint64_t> slept{0};
    std::atomic<uint64_t> spins_skipped_after_a_slow_reply{0};
    std::atomic<uint64_t> spins_withheld_for_other_waiters{0};
  } counts_;
};

// Thread-safe. Connections are created on demand, reused, and kept until the
// pool goes; the pool and its leases share ownership of the context, so it
// outlives every socket.
class ConnectionPool {
 public:
  ConnectionPool(std::shared_ptr<zmq::context_t> context, std::string endpoint, ConnectionOptions options);

 private:
  struct State;

 public:
  // Exclusive use of one connection; gives it back to the pool when destroyed.
  class Lease {
   public:
    Lease(Lease&&) noexcept = default;
    Lease& operator=(Lease&&) = delete;  // would have to give back the held connection first
    ~Lease();
    Connection& operator*() const { return *connection_; }
    Connection* operator->() const { return connection_.get(); }

   private:
    friend class ConnectionPool;
    Lease(std::shared_ptr<State> state, std::unique_ptr<Connection> connection);
    std::shared_ptr<State> state_;
    std::unique_ptr<Connection> connection_;
  };

  Lease acquire();
  Frames call(std::string_view op, Frames args);  // acquire + call
  Frames call(std::string_view op, Frames args, std::chrono::milliseconds timeout);

  const std::string& endpoint() const;
  size_t idle_connections() const;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace seqflow::transport
