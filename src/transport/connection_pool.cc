#include <mutex>

#include "seqflow/error.h"
#include "transport/connection.h"

namespace seqflow::transport {

struct ConnectionPool::State {
  std::shared_ptr<zmq::context_t> context;
  std::string endpoint;
  ConnectionOptions options;
  mutable std::mutex mutex;
  std::vector<std::unique_ptr<Connection>> idle;  // after `context`: closed before it
};

ConnectionPool::ConnectionPool(std::shared_ptr<zmq::context_t> context, std::string endpoint, ConnectionOptions options)
    : state_(std::make_shared<State>()) {
  if (!context) throw_invalid("ConnectionPool for '" + endpoint + "': context is null");
  if (options.timeout.count() <= 0) {
    throw_invalid("ConnectionPool for '" + endpoint + "': ConnectionOptions.timeout must be > 0 ms, got " +
                  std::to_string(options.timeout.count()));
  }
  check_busy_poll(options.busy_poll, "ConnectionPool for '" + endpoint + "': ConnectionOptions.busy_poll");
  state_->context = std::move(context);
  state_->endpoint = std::move(endpoint);
  state_->options = std::move(options);
}

ConnectionPool::Lease::Lease(std::shared_ptr<State> state, std::unique_ptr<Connection> connection)
    : state_(std::move(state)), connection_(std::move(connection)) {}

ConnectionPool::Lease::~Lease() {
  if (!connection_) return;  // moved from
  std::lock_guard lock(state_->mutex);
  state_->idle.push_back(std::move(connection_));
}

ConnectionPool::Lease ConnectionPool::acquire() {
  {
    std::lock_guard lock(state_->mutex);
    if (!state_->idle.empty()) {
      auto connection = std::move(state_->idle.back());
      state_->idle.pop_back();
      return Lease(state_, std::move(connection));
    }
  }
  // A new socket outside the lock: connect() may take a while.
  return Lease(state_, std::make_unique<Connection>(*state_->context, state_->endpoint, state_->options));
}

Frames ConnectionPool::call(std::string_view op, Frames args) {
  Lease lease = acquire();
  return lease->call(op, std::move(args));
}

Frames ConnectionPool::call(std::string_view op, Frames args, std::chrono::milliseconds timeout) {
  Lease lease = acquire();
  return lease->call(op, std::move(args), timeout);
}

const std::string& ConnectionPool::endpoint() const { return state_->endpoint; }

size_t ConnectionPool::idle_connections() const {
  std::lock_guard lock(state_->mutex);
  return state_->idle.size();
}

}  // namespace seqflow::transport
