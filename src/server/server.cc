// seqflow/server.h: ControllerService and StorageService with their
// optional metrics endpoint, behind the public options.
#include "seqflow/server.h"

#include "server/service_settings.h"

namespace seqflow {
namespace {

// A started service and its metrics endpoint, stopped in the reverse order.
template <class Service>
class Running {
 public:
  template <class Options>
  Running(Options options, const std::string& metrics_address, const std::string& metrics_token)
      : service_(std::make_unique<Service>(std::move(options))) {
    service_->start();
    endpoint_ = service_->endpoint();
    if (!metrics_address.empty()) {
      metrics_ = server::serve_metrics(metrics_address, "metrics_address", service_->metrics(), metrics_token);
    }
  }
  ~Running() { stop(); }

  const std::string& endpoint() const { return endpoint_; }
  std::string metrics_url() const {
    if (!metrics_) return "";
    const std::string& host = metrics_->host();
    const bool ipv6 = host.find(':') != std::string::npos;
    return "http://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(metrics_->port()) + "/metrics";
  }
  void stop() {
    if (metrics_) metrics_->stop();
    service_->stop();
  }
  Service& service() const { return *service_; }

 private:
  std::unique_ptr<Service> service_;
  std::unique_ptr<server::MetricsHttpServer> metrics_;
  std::string endpoint_;
};

}  // namespace

struct ControllerServer::Impl : Running<server::ControllerService> {
  using Running::Running;
};

ControllerServer::ControllerServer(ControllerServerOptions options)
    : impl_(std::make_unique<Impl>(server::controller_service_options(options), options.metrics_address,
                                   options.metrics_token)) {}
ControllerServer::~ControllerServer() = default;
std::string ControllerServer::endpoint() const { return impl_->endpoint(); }
std::string ControllerServer::metrics_url() const { return impl_->metrics_url(); }
void ControllerServer::stop() { impl_->stop(); }

struct StorageServer::Impl : Running<server::StorageService> {
  using Running::Running;
};

StorageServer::StorageServer(StorageServerOptions options)
    : impl_(std::make_unique<Impl>(server::storage_service_options(options), options.metrics_address,
                                   options.metrics_token)) {}
StorageServer::~StorageServer() = default;
std::string StorageServer::endpoint() const { return impl_->endpoint(); }
std::string StorageServer::metrics_url() const { return impl_->metrics_url(); }
StorageStats StorageServer::stats() const { return impl_->service().storage().stats(); }
void StorageServer::stop() { impl_->stop(); }

}  // namespace seqflow
