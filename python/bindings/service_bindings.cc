// seqflow._seqflow.server: the controller and storage services in this
// process (seqflow.serve_controller / serve_storage, Ray actors) over the
// public seqflow/server.h, with the settings of `seqflow serve`, and CURVE
// key files (seqflow/security.h). Starting and stopping release the GIL: a
// controller's handlers may call a sampler written in Python.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "bindings/gil.h"
#include "bindings/storage_stats.h"
#include "bindings/submodules.h"
#include "seqflow/error.h"
#include "seqflow/sampler.h"
#include "seqflow/security.h"
#include "seqflow/server.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

// A controller or storage service running in this process. Handles still
// serving are stopped at exit (stop_live_services), while the interpreter
// can still run the Python samplers their handlers may be calling.
class ServiceHandle {
 public:
  // Starting may load a checkpoint that restores a Python sampler's state: no GIL held.
  template <class Server, class Options>
  static std::unique_ptr<ServiceHandle> start(std::string role, Options options) {
    std::unique_ptr<Server> server;
    {
      GilReleased release;
      server = std::make_unique<Server>(std::move(options));
    }
    auto handle =
        std::unique_ptr<ServiceHandle>(new ServiceHandle(std::move(role), server->endpoint(), server->metrics_url()));
    if constexpr (std::is_same_v<Server, StorageServer>) {
      handle->storage_ = std::move(server);
    } else {
      handle->controller_ = std::move(server);
    }
    return handle;
  }

  ~ServiceHandle() {
    live().erase(this);
    GilReleased release;  // the handlers' threads may be waiting for the GIL (Python samplers)
    controller_.reset();
    storage_.reset();
  }

  ServiceHandle(const ServiceHandle&) = delete;
  ServiceHandle& operator=(const ServiceHandle&) = delete;

  static std::set<ServiceHandle*>& live() {
    static std::set<ServiceHandle*> handles;
    return handles;
  }

  const std::string& role() const { return role_; }
  const std::string& endpoint() const { return endpoint_; }

  std::optional<int> metrics_port() const {
    if (metrics_url_.empty()) return std::nullopt;
    const std::string address = metrics_address();
    return std::stoi(address.substr(address.rfind(':') + 1));
  }

  std::string serving_line() const {
    std::string line = "seqflow " + role_ + " serving on " + endpoint_;
    if (!metrics_url_.empty()) line += " metrics on " + metrics_address();
    return line;
  }

  nb::dict stats() const {
    if (role_ != "storage") throw nb::value_error(("stats() is a storage unit's, this is the " + role_).c_str());
    return stats_to_python(storage_->stats());
  }

  void stop() {
    live().erase(this);
    GilReleased release;
    if (controller_) controller_->stop();  // none: the parent's service, in a child after fork
    if (storage_) storage_->stop();
  }

  // In a child after fork the services' threads are the parent's: stopping
  // or destroying them here would wait for them forever, so the child leaks them.
  void abandon() {
    live().erase(this);
    (void)controller_.release();
    (void)storage_.release();
  }

 private:
  ServiceHandle(std::string role, std::string endpoint, std::string metrics_url)
      : role_(std::move(role)), endpoint_(std::move(endpoint)), metrics_url_(std::move(metrics_url)) {
    live().insert(this);
  }

  // http://HOST:PORT of the metrics URL (without its /metrics path).
  std::string metrics_address() const { return metrics_url_.substr(0, metrics_url_.rfind('/')); }

  std::string role_;
  std::string endpoint_;
  std::string metrics_url_;
  std::unique_ptr<ControllerServer> controller_;
  std::unique_ptr<StorageServer> storage_;
};

// The public options name some settings by their C++ fields; Python's
// parameters have `seqflow serve`'s names, which the errors keep.
template <class Fn>
auto with_python_names(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error& error) {
    std::string message = error.what();
    for (const auto& [field, parameter] :
         {std::pair<std::string_view, std::string_view>{"metrics_address ", "metrics "},
          {"controller_endpoint ", "controller "}}) {
      if (message.starts_with(field)) message = std::string(parameter) + message.substr(field.size());
    }
    throw Error(error.code(), message);
  }
}

// The settings both services take, into their options ("" and 0: not set).
template <class Options>
void apply_serving(Options& options, const std::string& metrics, size_t max_workers, size_t max_request_bytes,
                   const std::string& secret, const std::vector<std::string>& clients, const std::string& keys,
                   const std::string& checkpoint_root) {
  options.metrics_address = metrics;
  options.max_workers = max_workers;
  options.max_request_bytes = max_request_bytes;
  options.checkpoint_root = checkpoint_root;
  if (!keys.empty()) {
    if (!secret.empty() || !clients.empty()) {
      throw_invalid("curve_keys '" + keys + "' replaces curve_secret and curve_clients: give one or the other");
    }
    const auto named = [](const Error& error) {
      return Error(error.code(), std::string("curve_keys: ") + error.what());
    };
    try {
      options.curve = read_cluster_curve(keys);
      if (!options.metrics_address.empty()) options.metrics_token = read_metrics_token(keys);
    } catch (const Error& error) {
      throw named(error);
    }
    return;
  }
  options.curve = read_server_curve(secret, clients);  // a missing or bad key file first
  if (options.curve.enabled && clients.empty()) {
    throw_invalid("curve_secret '" + secret +
                  "' needs curve_clients: a CURVE service admits only listed client keys; list their .pub files, "
                  "or use curve_keys=DIR (seqflow keygen --cluster DIR)");
  }
}

std::unique_ptr<ServiceHandle> serve_controller(const std::string& bind, size_t storage_units,
                                                std::shared_ptr<Sampler> sampler, bool polling_mode,
                                                int64_t timing_alignment, const std::string& load_checkpoint,
                                                const std::string& metrics, size_t max_workers,
                                                size_t max_request_bytes, const std::string& curve_secret,
                                                const std::vector<std::string>& curve_clients,
                                                const std::string& curve_keys, const std::string& checkpoint_root) {
  ControllerServerOptions options;
  options.bind = bind;
  options.storage_units = storage_units;
  options.controller.sampler = std::move(sampler);
  options.controller.polling_mode = polling_mode;
  options.controller.timing_alignment = timing_alignment;
  options.load_checkpoint = load_checkpoint;
  apply_serving(options, metrics, max_workers, max_request_bytes, curve_secret, curve_clients, curve_keys,
                checkpoint_root);
  return with_python_names([&] { return ServiceHandle::start<ControllerServer>("controller", std::move(options)); });
}

std::unique_ptr<ServiceHandle> serve_storage(const std::string& controller, const std::string& bind,
                                             const std::string& advertise, const StorageOptions& storage,
                                             const std::string& metrics, size_t max_workers, size_t max_request_bytes,
                                             const std::string& curve_secret,
                                             const std::vector<std::string>& curve_clients,
                                             const std::string& curve_keys, const std::string& checkpoint_root,
                                             const std::string& controller_key_file) {
  StorageServerOptions options;
  options.bind = bind;
  options.controller_endpoint = controller;
  options.advertise = advertise;
  options.storage = storage;
  apply_serving(options, metrics, max_workers, max_request_bytes, curve_secret, curve_clients, curve_keys,
                checkpoint_root);
  if (!controller_key_file.empty()) {
    if (!options.curve.enabled) {
      throw_invalid("controller key file '" + controller_key_file +
                    "' needs the storage unit's own CURVE secret key file for its calls to the controller");
    }
    options.controller_public_key = read_key_file(controller_key_file).public_key;
  }
  return with_python_names([&] { return ServiceHandle::start<StorageServer>("storage", std::move(options)); });
}

}  // namespace

void bind_services(nb::module_ m) {
  nb::class_<ServiceHandle>(m, "ServiceHandle", "A controller or storage service running in this process.")
      .def_prop_ro("role", &ServiceHandle::role)
      .def_prop_ro("endpoint", &ServiceHandle::endpoint, "The bound endpoint, e.g. tcp://127.0.0.1:40123.")
      .def_prop_ro("metrics_port", &ServiceHandle::metrics_port, "The metrics endpoint's port, or None.")
      .def_prop_ro("serving_line", &ServiceHandle::serving_line,
                   "What ``seqflow serve`` prints: 'seqflow ROLE serving on ENDPOINT[ metrics on URL]'.")
      .def("stats", &ServiceHandle::stats,
           "A storage unit's use: {\"samples\": ..., \"bytes\": ..., \"overhead_bytes\": ...}.")
      .def("stop", &ServiceHandle::stop, "Stops serving (idempotent): running calls finish, queued ones are dropped.")
      .def("abandon", &ServiceHandle::abandon,
           "Forget the service without stopping it (in a child process after fork).")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](ServiceHandle& self, nb::args) { self.stop(); })
      .def("__repr__",
           [](const ServiceHandle& self) {
             return "ServiceHandle(" + std::string(nb::repr(nb::str(self.role().c_str())).c_str()) + ", " +
                    std::string(nb::repr(nb::str(self.endpoint().c_str())).c_str()) + ")";
           })
      .attr("__module__") = "seqflow.remote";

  // seqflow.remote's serve_controller and serve_storage check the arguments; "" and 0 mean not set.
  m.def("serve_controller", &serve_controller, "bind"_a, "storage_units"_a, "sampler"_a.none(), "polling_mode"_a,
        "timing_alignment"_a, "load_checkpoint"_a, "metrics"_a, "max_workers"_a, "max_request_bytes"_a,
        "curve_secret"_a, "curve_clients"_a, "curve_keys"_a, "checkpoint_root"_a,
        "The controller service in this process, serving when this returns.");
  m.def("serve_storage", &serve_storage, "controller"_a, "bind"_a, "advertise"_a, "storage"_a, "metrics"_a,
        "max_workers"_a, "max_request_bytes"_a, "curve_secret"_a, "curve_clients"_a, "curve_keys"_a,
        "checkpoint_root"_a, "controller_key"_a,
        "A storage unit in this process that registers with the controller service at `controller`.");
  m.def(
      "keygen",
      [](const std::string& prefix) {
        const CurveKeyPair keys = generate_curve_keys();
        write_key_files(prefix, keys);
        return keys.public_key;
      },
      "prefix"_a, "A new CURVE key pair as prefix.key and prefix.pub; returns the public key (Z85).");
  m.def(
      "read_key_file",
      [](const std::string& path) {
        const CurveKeyPair keys = read_key_file(path);
        return std::make_pair(keys.public_key, keys.secret_key.empty() ? std::nullopt : std::optional(keys.secret_key));
      },
      "path"_a, "(public key, secret key or None) of a .key or .pub file, as Z85 text.");
  m.def(
      "stop_live_services",
      [] {
        const std::set<ServiceHandle*> handles = ServiceHandle::live();
        for (ServiceHandle* handle : handles) handle->stop();
      },
      "Stops every service still serving (at exit, while Python samplers can still run).");
  m.def(
      "forget_parent_services",
      [] {
        const std::set<ServiceHandle*> handles = ServiceHandle::live();
        for (ServiceHandle* handle : handles) handle->abandon();
      },
      "In a child after fork: the services' threads are the parent's; never stop or free them here.");
}

}  // namespace seqflow::bindings
