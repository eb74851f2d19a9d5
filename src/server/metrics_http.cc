#include "server/metrics_http.h"

#include <httplib.h>

#include <sys/socket.h>

#include <chrono>
#include <string_view>

#include "common/constant_time.h"
#include "seqflow/error.h"

namespace seqflow::server {

MetricsHttpServer::MetricsHttpServer(std::string host, int port, std::function<std::string()> render, std::string token)
    : host_(std::move(host)), server_(std::make_unique<httplib::Server>()) {
  // Scrapes are rare and short: two threads, not httplib's default of one per core (min 8).
  // httplib's default sets SO_REUSEPORT, which lets a second server bind the
  // same port and silently share the scrapes; SO_REUSEADDR alone still
  // allows a quick restart.
  server_->set_socket_options([](socket_t socket) {
    int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  server_->Get("/metrics", [render = std::move(render), token = std::move(token)](const httplib::Request& request,
                                                                                  httplib::Response& response) {
    if (!token.empty() && !equal_in_constant_time(request.get_header_value("Authorization"), "Bearer " + token)) {
      response.status = 401;
      response.set_header("WWW-Authenticate", "Bearer");
      response.set_content(
          "metrics need 'Authorization: Bearer <token>' (the token of --curve-keys DIR/metrics.token)\n", "text/plain");
      return;
    }
    try {
      response.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
    } catch (const std::exception& error) {
      response.status = 500;
      response.set_content(std::string("metrics rendering failed: ") + error.what(), "text/plain");
    }
  });
  server_->Get("/health",
               [](const httplib::Request&, httplib::Response& response) { response.set_content("ok", "text/plain"); });
  port_ = port == 0 ? server_->bind_to_any_port(host_) : (server_->bind_to_port(host_, port) ? port : -1);
  if (port_ <= 0) {
    throw_invalid("metrics HTTP server cannot bind host '" + host_ + "' port " + std::to_string(port));
  }
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    finished_ = true;
  });
  // httplib's stop() does nothing before listen_after_bind has started, so
  // wait for it: otherwise an early stop() would leave the thread running.
  while (!server_->is_running() && !finished_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

MetricsHttpServer::~MetricsHttpServer() { stop(); }

void MetricsHttpServer::stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

}  // namespace seqflow::server
