// seqflow/server.h: ControllerService and StorageService with their
// optional metrics endpoint, behind the public options.
#include "seqflow/server.h"

#include "seqflow/error.h"
#include "server/service_settings.h"

namespace seqflow {
namespace {

// Runs one step of starting a server; its error names `option`, the public
// option the step depends on, so a frontend can name its own (seqflow serve).
template <class Step>
decltype(auto) naming(std::string_view option, Step&& step) {
  try {
    return step();
  } catch (const Error& error) {
    const std::string_view message = error.what();
    if (message.starts_with(option)) throw;
    throw Error(error.code(), std::string(option) + ": " + std::string(message));
  }
}

// A started service and its metrics endpoint, stopped in the reverse order.
template <class Service>
class Running {
 public:
  // `load_checkpoint`: what making the service loads (empty: nothing).
  template <class Options>
  Running(Options options, const std::string& metrics_address, const std::string& load_checkpoint = "") {
    if (load_checkpoint.empty()) {
      service_ = std::make_unique<Service>(std::move(options));
    } else {
      service_ = naming("load_checkpoint", [&] { return std::make_unique<Service>(std::move(options)); });
    }
    naming("bind", [&] { service_->start(); });
    endpoint_ = service_->endpoint();
    if (!metrics_address.empty()) {
      metrics_ = naming("metrics_address",
                        [&] { return server::serve_metrics(metrics_address, "metrics_address", service_->metrics()); });
    }
  }
  ~Running() { stop(); }

  const std::string& endpoint() const { return endpoint_; }
  std::string metrics_url() const { return metrics_ ? server::metrics_url(*metrics_) : ""; }
  void stop() {
    if (metrics_) metrics_->stop();
    service_->stop();
  }

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
                                   options.load_checkpoint)) {}
ControllerServer::~ControllerServer() = default;
std::string ControllerServer::endpoint() const { return impl_->endpoint(); }
std::string ControllerServer::metrics_url() const { return impl_->metrics_url(); }
void ControllerServer::stop() { impl_->stop(); }

struct StorageServer::Impl : Running<server::StorageService> {
  using Running::Running;
};

StorageServer::StorageServer(StorageServerOptions options)
    : impl_(std::make_unique<Impl>(server::storage_service_options(options), options.metrics_address)) {}
StorageServer::~StorageServer() = default;
std::string StorageServer::endpoint() const { return impl_->endpoint(); }
std::string StorageServer::metrics_url() const { return impl_->metrics_url(); }
void StorageServer::stop() { impl_->stop(); }

}  // namespace seqflow
