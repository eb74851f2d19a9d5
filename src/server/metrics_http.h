// A small HTTP server for Prometheus scrapes: GET /metrics and GET /health.
// The metrics name partitions, fields and tasks: with a token, GET /metrics
// requires "Authorization: Bearer TOKEN" (401 otherwise); /health stays open.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace seqflow::server {

class MetricsHttpServer {
 public:
  // Binds host:port (port 0: a free port) and serves in its own thread;
  // `render` is called for every GET /metrics (e.g. MetricsRegistry::render)
  // that carries `token` (empty: every GET /metrics).
  // Throws kInvalidArgument naming host and port when it cannot bind.
  MetricsHttpServer(std::string host, int port, std::function<std::string()> render, std::string token = "");
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }
  const std::string& host() const { return host_; }
  void stop();  // idempotent; also in the destructor

 private:
  std::string host_;
  int port_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace seqflow::server
