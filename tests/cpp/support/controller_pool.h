// A connection pool to a controller service on loopback, for tests that send
// it raw requests (5 s call timeout).
#pragma once

#include <chrono>
#include <memory>
#include <zmq.hpp>

#include "server/controller_service.h"
#include "transport/connection.h"

namespace seqflow::test {

inline std::shared_ptr<transport::ConnectionPool> pool_of(const server::ControllerService& service) {
  transport::ConnectionOptions options;
  options.timeout = std::chrono::seconds(5);
  return std::make_shared<transport::ConnectionPool>(std::make_shared<zmq::context_t>(1), service.endpoint(), options);
}

}  // namespace seqflow::test
