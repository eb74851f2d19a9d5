// seqflow._seqflow.net: the controller and storage services in this process
// (seqflow.serve_controller / serve_storage, Ray actors), with the settings
// of `seqflow serve`, and CURVE key files. Starting and stopping release the
// GIL: a controller's handlers may call a sampler written in Python.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>

#include "bindings/gil.h"
#include "bindings/storage_stats.h"
#include "bindings/submodules.h"
#include "transport/security.h"
#include "server/service_settings.h"
#include "seqflow/sampler.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

// A service and its optional metrics endpoint, stopped in that order.
template <class ServiceType>
class RunningService {
 public:
  // Loading a checkpoint may restore a Python sampler's state: no GIL held.
  template <class Options>
  RunningService(std::string role, Options options, std::string metrics_address)
      : role_(std::move(role)), metrics_address_(std::move(metrics_address)) {
    GilReleased release;
    service_ = std::make_unique<ServiceType>(std::move(options));
  }

  // The handlers' threads may be waiting for the GIL (Python samplers).
  ~RunningService() {
    GilReleased release;
    metrics_.reset();
    service_.reset();
  }

  void start() {
    GilReleased release;
    service_->start();
    if (!metrics_address_.empty()) metrics_ = server::serve_metrics(metrics_address_, "metrics", service_->metrics());
  }

  void stop() {
    GilReleased release;
    if (metrics_) metrics_->stop();
    service_->stop();
  }

  // After fork the service's threads exist only in the parent: stopping or
  // destroying it here would wait for them forever, so the child leaks it.
  void abandon() {
    (void)service_.release();
    (void)metrics_.release();
  }

  std::string endpoint() const { return service_->endpoint(); }
  std::optional<int> metrics_port() const { return metrics_ ? std::optional(metrics_->port()) : std::nullopt; }
  std::string serving_line() const { return server::serving_line(role_, service_->endpoint(), metrics_.get()); }
  ServiceType& service() { return *service_; }

 private:
  std::string role_;
  std::string metrics_address_;
  std::unique_ptr<ServiceType> service_;
  std::unique_ptr<server::MetricsHttpServer> metrics_;
};

using ControllerHandle = RunningService<server::ControllerService>;
using StorageHandle = RunningService<server::StorageService>;

server::ServingSettings serving_settings(std::string bind, size_t max_workers, size_t max_request_bytes,
                                         std::string curve_secret, std::vector<std::string> curve_clients,
                                         std::string checkpoint_root) {
  return server::ServingSettings{std::move(bind),          max_workers,
                                 max_request_bytes,        std::move(curve_secret),
                                 std::move(curve_clients), std::move(checkpoint_root)};
}

template <class Handle>
void bind_common(nb::class_<Handle>& cls) {
  cls.def("start", &Handle::start, "Binds and serves; raises ValueError naming the address when it cannot bind.")
      .def("stop", &Handle::stop, "Stops serving (idempotent): running calls finish, queued ones are dropped.")
      .def("abandon", &Handle::abandon, "Forget the service without stopping it (in a child process after fork).")
      .def_prop_ro("endpoint", &Handle::endpoint, "The bound endpoint, e.g. tcp://127.0.0.1:40123.")
      .def_prop_ro("metrics_port", &Handle::metrics_port, "The metrics endpoint's port, or None.")
      .def_prop_ro("serving_line", &Handle::serving_line, "'seqflow ROLE serving on ENDPOINT[ metrics on URL]'.");
}

}  // namespace

void bind_services(nb::module_ m) {
  nb::class_<ControllerHandle> controller(m, "ControllerService",
                                          "The controller as a service in this process (seqflow serve controller).");
  controller.def(
      "__init__",
      [](ControllerHandle* self, std::string bind, size_t storage_units, std::shared_ptr<Sampler> sampler,
         bool polling_mode, std::string load_checkpoint, std::string metrics, size_t max_workers,
         size_t max_request_bytes, std::string curve_secret, std::vector<std::string> curve_clients,
         std::string checkpoint_root) {
        server::ControllerSettings settings;
        settings.serving = serving_settings(std::move(bind), max_workers, max_request_bytes, std::move(curve_secret),
                                            std::move(curve_clients), std::move(checkpoint_root));
        settings.storage_units = storage_units;
        settings.sampler = std::move(sampler);
        settings.polling_mode = polling_mode;
        settings.load_checkpoint = std::move(load_checkpoint);
        new (self) ControllerHandle("controller", server::controller_service_options(settings), std::move(metrics));
      },
      "bind"_a, "storage_units"_a, "sampler"_a.none(), "polling_mode"_a, "load_checkpoint"_a, "metrics"_a,
      "max_workers"_a, "max_request_bytes"_a, "curve_secret"_a, "curve_clients"_a, "checkpoint_root"_a);
  bind_common(controller);

  nb::class_<StorageHandle> storage(m, "StorageService",
                                    "A storage unit as a service in this process (seqflow serve storage).");
  storage
      .def(
          "__init__",
          [](StorageHandle* self, std::string bind, std::string controller_endpoint, std::string advertise,
             uint64_t max_bytes, uint64_t max_samples, std::string metrics, size_t max_workers,
             size_t max_request_bytes, std::string curve_secret, std::vector<std::string> curve_clients,
             std::string controller_key, std::string checkpoint_root) {
            server::StorageSettings settings;
            settings.serving =
                serving_settings(std::move(bind), max_workers, max_request_bytes, std::move(curve_secret),
                                 std::move(curve_clients), std::move(checkpoint_root));
            settings.controller = std::move(controller_endpoint);
            settings.advertise = std::move(advertise);
            settings.max_bytes = max_bytes;
            settings.max_samples = max_samples;
            settings.controller_key_file = std::move(controller_key);
            new (self) StorageHandle("storage", server::storage_service_options(settings), std::move(metrics));
          },
          "bind"_a, "controller"_a, "advertise"_a, "max_bytes"_a, "max_samples"_a, "metrics"_a, "max_workers"_a,
          "max_request_bytes"_a, "curve_secret"_a, "curve_clients"_a, "controller_key"_a, "checkpoint_root"_a)
      .def(
          "stats", [](StorageHandle& self) { return stats_to_python(self.service().storage().stats()); },
          "This unit's use: {'samples': ..., 'bytes': ...}.");
  bind_common(storage);

  m.def(
      "write_key_files",
      [](const std::string& prefix) {
        const transport::CurveKeyPair keys = transport::generate_curve_keys();
        transport::write_key_files(prefix, keys);
        return keys.public_key;
      },
      "prefix"_a, "A new CURVE key pair as prefix.key (mode 0600) and prefix.pub; returns the public key.");
  m.def(
      "read_key_file",
      [](const std::string& path) {
        const transport::CurveKeyPair keys = transport::read_key_file(path);
        return std::make_pair(keys.public_key, keys.secret_key.empty() ? std::nullopt : std::optional(keys.secret_key));
      },
      "path"_a, "(public key, secret key or None) of a .key or .pub file, as Z85 text.");
}

}  // namespace seqflow::bindings
